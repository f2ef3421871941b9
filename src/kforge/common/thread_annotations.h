// Thread safety the compiler checks: Clang's thread-safety attributes as macros, and the mutex
// and scoped lock of kforge that carry them (libstdc++'s std::mutex and std::lock_guard carry
// none, so the analysis could not see them).
//
// Contract: every mutex in src/ and apps/ is a `kforge::Mutex`, locked through `MutexLock`
// (or, for the one recursive lock, a `RecursiveMutex` locked through `RecursiveMutexLock`);
// every member it guards is declared GUARDED_BY(mu_) (PT_GUARDED_BY for what a pointer
// points to), every function that expects its caller to hold the mutex is REQUIRES(mu_), and a
// public function that takes the mutex itself is EXCLUDES(mu_) where a caller could otherwise
// deadlock on it. Clang (-Wthread-safety, an error in `make tidy-ci`'s thread-safety pass,
// scripts/thread_safety.py) then refuses a read or write of a guarded member without the lock.
// GCC sees the macros as empty; the types behave exactly like std::mutex/std::unique_lock.
//
// Where the analysis cannot follow (a lock handed from one function to another, a lambda run
// by a library under the lock), the escape is the narrowest one that works, with a comment:
// a lambda annotated REQUIRES(mu_), `Mutex::assert_held()`, and NO_THREAD_SAFETY_ANALYSIS on
// one function only as the last resort.
//
// Thread-safety: Mutex and MutexLock are what they are; a MutexLock is used by one thread.
//
// Example:
//   class Counter {
//    public:
//     void add(int n) EXCLUDES(mu_) {
//       MutexLock lock(mu_);
//       total_ += n;
//       changed_.notify_all();
//     }
//     void wait_for_at_least(int n) EXCLUDES(mu_) {
//       MutexLock lock(mu_);
//       lock.wait(changed_, [&]() REQUIRES(mu_) { return total_ >= n; });
//     }
//    private:
//     Mutex mu_;
//     std::condition_variable changed_;
//     int total_ GUARDED_BY(mu_) = 0;
//   };
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#if defined(__clang__)
#define KF_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define KF_THREAD_ANNOTATION(x)  // GCC has no thread-safety analysis
#endif

// A type that is a lock ("mutex" names it in the diagnostics).
#define CAPABILITY(x) KF_THREAD_ANNOTATION(capability(x))
// An RAII type that holds a capability for its lifetime (MutexLock).
#define SCOPED_CAPABILITY KF_THREAD_ANNOTATION(scoped_lockable)
// A member read or written only with `x` held.
#define GUARDED_BY(x) KF_THREAD_ANNOTATION(guarded_by(x))
// A pointer (or smart pointer) member whose pointee is used only with `x` held.
#define PT_GUARDED_BY(x) KF_THREAD_ANNOTATION(pt_guarded_by(x))
// Lock order: this mutex is taken before / after the named ones.
#define ACQUIRED_BEFORE(...) KF_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) KF_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
// A function whose caller holds the capability (exclusively / at least shared).
#define REQUIRES(...) KF_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) KF_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// A function that takes / gives up the capability and returns with it held / released.
#define ACQUIRE(...) KF_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) KF_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) KF_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) KF_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) KF_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// A function the caller must not call with the capability held (it takes it itself).
#define EXCLUDES(...) KF_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// A function that checks at run time (or asserts) that the capability is held.
#define ASSERT_CAPABILITY(x) KF_THREAD_ANNOTATION(assert_capability(x))
// A function returning a reference to the capability (an accessor of a mutex).
#define RETURN_CAPABILITY(x) KF_THREAD_ANNOTATION(lock_returned(x))
// The last resort: the analysis skips this one function. Say why next to it.
#define NO_THREAD_SAFETY_ANALYSIS KF_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace kforge {

// std::mutex with the annotations. Not recursive; lock through MutexLock.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // Tells the analysis that this thread holds the mutex where it cannot see the lock being
  // taken (a callback the owner runs under it). No run-time check: say at the call why it holds.
  void assert_held() const ASSERT_CAPABILITY(this) {}

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// std::unique_lock<std::mutex> over a Mutex: held from construction to destruction unless
// unlock()ed (and lock()ed again) in between. The waits take a std::condition_variable and
// return with the mutex held again; a predicate that reads guarded members is a lambda
// annotated REQUIRES(mu_) (the analysis checks lambdas as functions of their own).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Gives the mutex up within the scope (around work that must not hold it) and takes it back.
  void unlock() RELEASE() { lock_.unlock(); }
  void lock() ACQUIRE() { lock_.lock(); }

  void wait(std::condition_variable& cv) { cv.wait(lock_); }
  template <class Predicate>
  void wait(std::condition_variable& cv, Predicate ready) {
    cv.wait(lock_, std::move(ready));
  }
  template <class Rep, class Period>
  std::cv_status wait_for(std::condition_variable& cv,
                          const std::chrono::duration<Rep, Period>& timeout) {
    return cv.wait_for(lock_, timeout);
  }
  template <class Rep, class Period, class Predicate>
  bool wait_for(std::condition_variable& cv, const std::chrono::duration<Rep, Period>& timeout,
                Predicate ready) {
    return cv.wait_for(lock_, timeout, std::move(ready));
  }
  template <class Clock, class Duration>
  std::cv_status wait_until(std::condition_variable& cv,
                            const std::chrono::time_point<Clock, Duration>& deadline) {
    return cv.wait_until(lock_, deadline);
  }
  template <class Clock, class Duration, class Predicate>
  bool wait_until(std::condition_variable& cv,
                  const std::chrono::time_point<Clock, Duration>& deadline, Predicate ready) {
    return cv.wait_until(lock_, deadline, std::move(ready));
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

// std::recursive_mutex with the annotations, for the one lock a thread may take again while
// it holds it (through calls: the analysis checks each function on its own, so it never sees
// the nesting). Lock through RecursiveMutexLock.
class CAPABILITY("mutex") RecursiveMutex {
 public:
  RecursiveMutex() = default;
  RecursiveMutex(const RecursiveMutex&) = delete;
  RecursiveMutex& operator=(const RecursiveMutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  std::recursive_mutex mu_;
};

class SCOPED_CAPABILITY RecursiveMutexLock {
 public:
  explicit RecursiveMutexLock(RecursiveMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~RecursiveMutexLock() RELEASE() { mu_.unlock(); }
  RecursiveMutexLock(const RecursiveMutexLock&) = delete;
  RecursiveMutexLock& operator=(const RecursiveMutexLock&) = delete;

 private:
  RecursiveMutex& mu_;
};

}  // namespace kforge
