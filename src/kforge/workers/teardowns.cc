#include "kforge/workers/teardowns.h"

#include <algorithm>
#include <utility>

namespace kforge::workers {

Teardowns::Teardowns() : thread_([this] { loop(); }) {}

Teardowns::~Teardowns() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Teardowns::add(Grave grave) {
  {
    MutexLock lock(mu_);
    graves_.push_back(std::move(grave));
  }
  cv_.notify_one();
}

void Teardowns::drain() {
  MutexLock lock(mu_);
  lock.wait(idle_cv_, [this]() REQUIRES(mu_) { return graves_.empty() && !busy_; });
}

void Teardowns::loop() {
  MutexLock lock(mu_);
  for (;;) {
    // Pending graves are finished before a stop: nothing a job started may outlive kforge.
    lock.wait(cv_, [this]() REQUIRES(mu_) { return stop_ || !graves_.empty(); });
    if (graves_.empty()) return;
    Grave grave = std::move(graves_.front());
    graves_.pop_front();
    busy_ = true;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    if (grave.end) grave.end();
    grave.ticket.reset();  // the device's next grant, now that the processes are gone
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    grave.end = nullptr;  // the child's cgroup and scratch directory go
    lock.lock();
    busy_ = false;
    ++done_;
    last_ms_ = ms;
    max_ms_ = std::max(max_ms_, ms);
    idle_cv_.notify_all();
  }
}

Json Teardowns::status() const {
  MutexLock lock(mu_);
  return {{"pending", graves_.size() + (busy_ ? 1 : 0)},
          {"done", done_},
          {"last_ms", last_ms_},
          {"max_ms", max_ms_}};
}

std::unique_ptr<DeviceGate::Ticket> teardown_ticket(std::unique_ptr<DeviceGate::Ticket> held,
                                                    DeviceGate* gate, const std::string& job_id) {
  if (held || gate == nullptr) return held;
  auto queued = gate->request("teardown of " + job_id, DeviceGate::Mode::kShared);
  return queued.is_ok() ? std::move(queued).value() : nullptr;
}

}  // namespace kforge::workers
