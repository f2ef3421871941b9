// Refused: the member read after the scope gave the mutex up.
#include "counter.h"

namespace kforge::planted {

void Counter::add(int n) {
  MutexLock lock(mu_);
  total_ += n;
  lock.unlock();
  changed_.notify_all();
  if (total_ > 100) changed_.notify_all();
}

}  // namespace kforge::planted
