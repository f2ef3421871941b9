// Allowed: every use of Counter::total_ holds Counter::mu_ (the control of the planted ones).
#include "counter.h"

namespace kforge::planted {

void Counter::add(int n) {
  MutexLock lock(mu_);
  add_locked(n);
  changed_.notify_all();
}

void Counter::wait_for(int n) {
  MutexLock lock(mu_);
  lock.wait(changed_, [&]() REQUIRES(mu_) { return total_ >= n; });
  lock.unlock();
  lock.lock();
  total_ -= n;
}

}  // namespace kforge::planted
