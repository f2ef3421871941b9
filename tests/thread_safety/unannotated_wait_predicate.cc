// Refused: a wait predicate that reads the member without saying it runs under the mutex
// (the analysis checks a lambda as a function of its own: REQUIRES(mu_) on it is the fix).
#include "counter.h"

namespace kforge::planted {

void Counter::wait_for(int n) {
  MutexLock lock(mu_);
  lock.wait(changed_, [&] { return total_ >= n; });
}

}  // namespace kforge::planted
