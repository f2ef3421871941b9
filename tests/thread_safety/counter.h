// The class the planted-violation tests compile (tests/thread_safety/CMakeLists.txt): a
// member guarded by a kforge::Mutex, a function that expects the lock, and a wait whose
// predicate reads the member. Each *.cc beside it uses it once, rightly or wrongly.
#pragma once

#include <condition_variable>

#include "kforge/common/thread_annotations.h"

namespace kforge::planted {

class Counter {
 public:
  void add(int n) EXCLUDES(mu_);
  void add_locked(int n) REQUIRES(mu_) { total_ += n; }
  void wait_for(int n) EXCLUDES(mu_);

  Mutex mu_;  // public, so a planted use can take it or not
  std::condition_variable changed_;
  int total_ GUARDED_BY(mu_) = 0;
};

}  // namespace kforge::planted
