// The warm processes a worker keeps ahead of jobs, shared by both workers (PythonWorker's
// forked children, NativeCudaWorker's started processes): start them until `target` wait,
// hand out the oldest (most likely ready) one, try fresh ones when one died while waiting.
//
// What differs between the workers comes in as Hooks: how a process is started, how to wait
// until it says `ready`, and what to do with one that failed (kill it).
//
// Thread-compatible: used by the worker's runner thread only.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "kforge/common/log.h"
#include "kforge/common/status.h"

namespace kforge::workers {

// A worker's state as /health and /stats report it.
enum class WorkerState { kStopped, kStarting, kReady, kBusy, kFailed };

constexpr std::string_view worker_state_name(WorkerState s) {
  switch (s) {
    case WorkerState::kStopped:
      return "stopped";
    case WorkerState::kStarting:
      return "starting";
    case WorkerState::kReady:
      return "ready";
    case WorkerState::kBusy:
      return "busy";
    case WorkerState::kFailed:
      return "failed";
  }
  return "unknown";
}

template <typename Child>
class WarmPool {
 public:
  struct Hooks {
    std::function<StatusOr<std::unique_ptr<Child>>()> start;
    std::function<Status(Child&)> wait_ready;
    std::function<void(Child&, const Status& why)> discard;
  };

  WarmPool(std::string device, int target, Hooks hooks)
      : device_(std::move(device)), target_(target), hooks_(std::move(hooks)) {}

  // Starts processes until `target` are waiting. The first error stops it (and is returned).
  Status top_up() {
    while (static_cast<int>(warm_.size()) < target_) {
      auto child = hooks_.start();
      if (!child.is_ok()) {
        KF_LOG_WARN("device={} could not start a warm worker process: {}", device_,
                    child.status().message());
        return child.status();
      }
      warm_.push_back(std::move(child).value());
    }
    return Status::ok();
  }

  // Tops up and waits until every waiting process is ready, dropping the ones that fail.
  // Returns how many are ready.
  size_t warm_all() {
    (void)top_up();
    for (auto it = warm_.begin(); it != warm_.end();) {
      if (Status ready = hooks_.wait_ready(**it); !ready) {
        hooks_.discard(**it, ready);
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
        auto started = hooks_.start();
        if (!started.is_ok()) {
          last = started.status();
          continue;
        }
        child = std::move(started).value();
      }
      Status ready = hooks_.wait_ready(*child);
      if (ready) return child;
      last = ready;
      hooks_.discard(*child, ready);
    }
    return last;
  }

  void clear() { warm_.clear(); }
  size_t size() const { return warm_.size(); }
  int target() const { return target_; }

 private:
  std::string device_;
  int target_;
  Hooks hooks_;
  std::deque<std::unique_ptr<Child>> warm_;  // oldest first
};

}  // namespace kforge::workers
