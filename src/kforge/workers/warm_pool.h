// The warm processes a worker keeps ahead of jobs, one class for both workers
// (PythonWorker's forked children, NativeCudaWorker's started processes): start them until
// `target` wait (raised while jobs are queued, up to a maximum: set_demand()), hand out the oldest
// (most likely ready) one, retire one that died or failed before it was ready (kill it, count it)
// and start a fresh one in its place, up to a bound. Its counts go into the worker's WorkerBook
// (processes started, restarts, crashes), which /health, /stats and /metrics read.
//
// What differs between the workers comes in as Hooks: how a process is started, how to wait
// until it says `ready`, and where its protocol channel is. One pool per worker, and so per
// device.
//
// Thread-compatible: the worker guards it with one lock (the book is thread-safe); only
// wait_ready() may run without it.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kforge/common/log.h"
#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/workers/child_channel.h"
#include "kforge/workers/worker_book.h"

namespace kforge::workers {

template <typename Child>
class WarmPool {
 public:
  struct Hooks {
    // Starts one process (not yet ready).
    std::function<StatusOr<std::unique_ptr<Child>>()> start;
    // Waits until it sent `ready`; an error means it is lost.
    std::function<Status(Child&)> wait_ready;
    // Its protocol channel (the pool kills a lost process through it).
    std::function<ChildChannel&(Child&)> channel;
  };

  // `target`: processes kept waiting (0 starts each on demand); `max_target`: how far
  // set_demand() may raise it while jobs are queued (at most `target` when smaller). `book`
  // outlives the pool.
  WarmPool(std::string device, int target, Hooks hooks, WorkerBook& book, int max_target = 0)
      : device_(std::move(device)),
        base_(target),
        max_(std::max(target, max_target)),
        target_(target),
        hooks_(std::move(hooks)),
        book_(book) {}

  // Jobs queued for the device that will each need a process: the target becomes that many,
  // between the base target and the maximum. Processes already waiting beyond a lowered
  // target stay until jobs take them.
  void set_demand(int queued) { target_ = std::clamp(queued, base_, max_); }

  // Starts processes until `target` are waiting. The first error stops it (and is returned).
  Status top_up() {
    while (static_cast<int>(warm_.size()) < target_) {
      auto child = start_one();
      if (!child.is_ok()) return child.status();
      warm_.push_back(std::move(child).value());
    }
    return Status::ok();
  }

  // Tops up and waits until every waiting process is ready, retiring the ones that fail.
  // Returns how many are ready.
  size_t warm_all() {
    (void)top_up();
    for (auto it = warm_.begin(); it != warm_.end();) {
      if (Status ready = wait(**it); !ready) {
        it = warm_.erase(it);
        continue;
      }
      ++it;
    }
    return warm_.size();
  }

  // A ready process: the oldest waiting one, else a new one; up to `attempts` tries when
  // processes die before they are ready. The last error otherwise.
  StatusOr<std::unique_ptr<Child>> take(int attempts = 3) {
    Status last = unavailable("no worker process could be started");
    for (int attempt = 0; attempt < attempts; ++attempt) {
      std::unique_ptr<Child> child;
      if (!warm_.empty()) {
        child = std::move(warm_.front());
        warm_.pop_front();
      } else {
        auto started = start_one();
        if (!started.is_ok()) {
          last = started.status();
          continue;
        }
        child = std::move(started).value();
      }
      Status ready = wait(*child);
      if (ready) return child;
      last = ready;
    }
    return last;
  }

  // For a worker whose jobs run side by side (a device gate): one process toward `target`,
  // started under the caller's lock and waited for without it (wait_ready()), so jobs keep
  // taking the ready ones meanwhile; adopt() hands it back with wait_ready()'s status.
  // start_missing() gives null when none is missing, counting those still warming up.
  StatusOr<std::unique_ptr<Child>> start_missing() {
    if (static_cast<int>(warm_.size()) + warming_ >= target_) return std::unique_ptr<Child>();
    auto child = start_one();
    if (child.is_ok() && ++warming_ > most_warming_.load(std::memory_order_relaxed)) {
      most_warming_.store(warming_, std::memory_order_relaxed);  // written under the lock only
    }
    return child;
  }
  // Touches no pool state: call it without the lock that guards the pool.
  Status wait_ready(Child& child) const { return hooks_.wait_ready(child); }
  void adopt(std::unique_ptr<Child> child, const Status& ready) {
    --warming_;
    if (settle(*child, ready)) warm_.push_back(std::move(child));
  }

  // start_missing(), wait_ready() and adopt() until `target` wait or one fails, for a worker
  // whose jobs run side by side: every missing process is started at once (they warm up
  // side by side), then each is waited for and adopted in turn. `mu` is the lock that
  // guards this pool (held to start and to adopt, never while waiting); what
  // `while_warming(child)` returns is kept alive while the child warms up (the device
  // gate's registration that stops it during timed regions); `adopted`, if given, is
  // notified after each adoption (a job waiting for a process, see warming()).
  void refill(Mutex& mu, const std::function<std::shared_ptr<void>(Child&)>& while_warming,
              std::condition_variable* adopted = nullptr) EXCLUDES(mu) {
    for (;;) {
      std::vector<std::unique_ptr<Child>> started;
      {
        MutexLock lock(mu);
        for (;;) {
          auto one = start_missing();
          if (!one.is_ok() || *one == nullptr) break;
          started.push_back(std::move(one).value());
        }
      }
      if (started.empty()) return;
      std::vector<std::shared_ptr<void>> held;
      held.reserve(started.size());
      for (auto& child : started)
        held.push_back(while_warming(*child));
      bool all_ready = true;
      for (size_t i = 0; i < started.size(); ++i) {
        const Status ready = wait_ready(*started[i]);
        held[i].reset();
        {
          MutexLock lock(mu);
          adopt(std::move(started[i]), ready);
        }
        if (adopted != nullptr) adopted->notify_all();
        all_ready = all_ready && ready.is_ok();
      }
      if (!all_ready) return;
    }
  }

  // Retires every waiting process (destroying one kills it and removes its scratch).
  void clear() { warm_.clear(); }
  size_t size() const { return warm_.size(); }
  // Started by start_missing() and not yet adopted: a job that finds none waiting can wait
  // for one of these instead of starting another.
  int warming() const { return warming_; }
  int target() const { return target_; }
  int max_target() const { return max_; }
  // The most processes warming at once so far (started by start_missing()); the one
  // member that may be read without the pool's lock (status pages).
  int most_warming() const { return most_warming_.load(std::memory_order_relaxed); }

 private:
  StatusOr<std::unique_ptr<Child>> start_one() {
    auto child = hooks_.start();
    if (!child.is_ok()) {
      KF_LOG_WARN("device={} could not start a worker process: {}", device_,
                  child.status().message());
      book_.note_error(child.status().message());
      return child.status();
    }
    book_.note_started();
    if (lost_ > 0) {  // this one replaces a process that died before it was ready
      --lost_;
      book_.note_restart();
    }
    return child;
  }

  // Waits until `child` is ready; a lost one is killed and counted.
  Status wait(Child& child) {
    Status ready = hooks_.wait_ready(child);
    settle(child, ready);
    return ready;
  }

  // Books the outcome of a wait: true when `child` is ready, else it is killed and counted.
  bool settle(Child& child, const Status& ready) {
    ChildChannel& channel = hooks_.channel(child);
    if (ready) {
      book_.note_ready(channel.ready_message);
      return true;
    }
    KF_LOG_WARN("device={} worker process pid={} lost before it was ready: {}", device_,
                channel.pid, ready.message());
    channel.kill_all();
    book_.note_lost_before_ready(ready.message());
    ++lost_;
    return false;
  }

  std::string device_;
  const int base_;
  const int max_;
  int target_;
  Hooks hooks_;
  WorkerBook& book_;
  std::deque<std::unique_ptr<Child>> warm_;  // oldest first
  int64_t lost_ = 0;                         // processes lost before ready and not yet replaced
  int warming_ = 0;                          // started by start_missing(), not yet adopted
  std::atomic<int> most_warming_{0};
};

}  // namespace kforge::workers
