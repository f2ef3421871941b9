#include "kforge/scheduler/scheduler.h"

#include <algorithm>

#include "kforge/common/log.h"

namespace kforge::scheduler {

Scheduler::Scheduler(std::vector<DeviceSlotInfo> devices, RunFn run, PrepareFn prepare)
    : devices_(std::move(devices)),
      run_(std::move(run)),
      prepare_(std::move(prepare)),
      slots_(devices_.size()) {}

Scheduler::~Scheduler() {
  stop();
}

StatusOr<std::string> Scheduler::resolve_target(std::string_view requested) const {
  bool any_gpu = std::any_of(devices_.begin(), devices_.end(),
                             [](const DeviceSlotInfo& d) { return d.is_gpu; });
  std::string r(requested);
  for (char& c : r)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (r.empty() || r == "auto") {
    if (any_gpu) return std::string(kAnyGpu);
    for (const auto& d : devices_) {
      if (d.name == "cpu") return std::string("cpu");
    }
  } else if (r == "gpu" || r == "cuda") {
    if (any_gpu) return std::string(kAnyGpu);
  } else {
    if (r.starts_with("gpu:")) r = "cuda:" + r.substr(4);
    for (const auto& d : devices_) {
      if (d.name == r) return r;
    }
  }
  std::string available;
  for (const auto& d : devices_)
    available += (available.empty() ? "" : ", ") + d.name;
  if (available.empty()) available = "none";
  return invalid_argument("unknown or unavailable device '" + std::string(requested) +
                              "' (this server has: " + available +
                              (any_gpu ? "; 'gpu' picks any GPU" : "") + ")",
                          "device");
}

void Scheduler::enqueue(const std::string& job_id, const std::string& target) {
  {
    MutexLock lock(mu_);
    queue_.push_back({next_seq_++, job_id, target});
  }
  cv_.notify_all();
}

bool Scheduler::remove(const std::string& job_id) {
  MutexLock lock(mu_);
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [&](const Queued& q) { return q.job_id == job_id; });
  if (it == queue_.end()) return false;
  queue_.erase(it);
  return true;
}

bool Scheduler::another_gpu_less_busy_locked(size_t slot) const {
  const size_t mine = slots_[slot].running.size();
  for (size_t j = 0; j < devices_.size(); ++j) {
    if (j == slot || !devices_[j].is_gpu) continue;
    const size_t theirs = slots_[j].running.size();
    if (theirs < mine && static_cast<int>(theirs) < std::max(1, devices_[j].depth)) return true;
  }
  return false;
}

long Scheduler::pick_locked(size_t slot) const {
  const auto& device = devices_[slot];
  // With depth > 1 a GPU with a job in flight still has free runners: a "gpu" job goes to a
  // GPU with fewer jobs in flight when there is one (its runners take it).
  const bool leave_any_gpu = device.is_gpu && another_gpu_less_busy_locked(slot);
  for (size_t i = 0; i < queue_.size(); ++i) {  // queue_ is in arrival order
    const auto& q = queue_[i];
    if (q.target == device.name || (device.is_gpu && q.target == kAnyGpu && !leave_any_gpu)) {
      return static_cast<long>(i);
    }
  }
  return -1;
}

void Scheduler::runner_loop(size_t slot, int lane) {
  const std::string device = devices_[slot].name;
  if (lane == 0 && prepare_) prepare_(device);
  MutexLock lock(mu_);
  // The other runners of the device take jobs only once its workers are prepared (prepare
  // and run are not called concurrently).
  if (lane == 0) {
    slots_[slot].prepared = true;
    cv_.notify_all();
  } else {
    lock.wait(cv_, [&]() REQUIRES(mu_) { return stopping_ || slots_[slot].prepared; });
  }
  while (true) {
    long index = -1;
    lock.wait(cv_, [&]() REQUIRES(mu_) {
      if (stopping_) return true;
      index = pick_locked(slot);
      return index >= 0;
    });
    if (stopping_) return;
    Queued job = queue_[static_cast<size_t>(index)];
    queue_.erase(queue_.begin() + index);
    auto& s = slots_[slot];
    if (s.running.empty()) s.busy_since = std::chrono::steady_clock::now();
    s.running.push_back(job.job_id);
    s.busy = true;
    lock.unlock();
    try {
      run_(job.job_id, device);
    } catch (const std::exception& e) {
      // run_ reports job failures itself; an exception here is a bug, not a job result.
      KF_LOG_ERROR("job={} device={} runner caught exception: {}", job.job_id, device, e.what());
    }
    lock.lock();
    end_locked(slot, job.job_id);  // when run_ did not call job_ended
  }
}

void Scheduler::end_locked(size_t slot, const std::string& job_id) {
  auto& s = slots_[slot];
  auto it = std::find(s.running.begin(), s.running.end(), job_id);
  if (it == s.running.end()) return;
  s.running.erase(it);
  if (s.running.empty()) {
    s.busy = false;
    s.busy_time += std::chrono::steady_clock::now() - s.busy_since;
  }
  ++s.jobs_run;
}

void Scheduler::job_ended(const std::string& job_id) {
  MutexLock lock(mu_);
  for (size_t slot = 0; slot < slots_.size(); ++slot)
    end_locked(slot, job_id);
}

void Scheduler::start() {
  MutexLock lock(mu_);
  if (!runners_.empty()) return;
  stopping_ = false;
  for (size_t i = 0; i < devices_.size(); ++i) {
    for (int lane = 0; lane < std::max(1, devices_[i].depth); ++lane)
      runners_.emplace_back([this, i, lane] { runner_loop(i, lane); });
  }
}

void Scheduler::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : runners_) {
    if (t.joinable()) t.join();
  }
  runners_.clear();
}

size_t Scheduler::queue_depth() const {
  MutexLock lock(mu_);
  return queue_.size();
}

Json Scheduler::device_status() const {
  MutexLock lock(mu_);
  auto now = std::chrono::steady_clock::now();
  double uptime_ms = std::chrono::duration<double, std::milli>(now - created_).count();
  Json out = Json::array();
  for (size_t i = 0; i < devices_.size(); ++i) {
    const auto& s = slots_[i];
    auto busy = s.busy_time + (s.busy ? now - s.busy_since : std::chrono::steady_clock::duration{});
    double busy_ms = std::chrono::duration<double, std::milli>(busy).count();
    size_t queued = 0;
    for (const auto& q : queue_) {
      if (q.target == devices_[i].name) ++queued;
    }
    Json d = {{"name", devices_[i].name},
              {"kind", devices_[i].is_gpu ? "gpu" : "cpu"},
              {"busy", s.busy},
              {"jobs_run", s.jobs_run},
              {"busy_ms", busy_ms},
              {"utilisation", uptime_ms > 0 ? busy_ms / uptime_ms : 0.0},
              {"queued", queued},
              {"running", s.running.size()},
              {"depth", std::max(1, devices_[i].depth)}};
    if (s.busy) d["current_job"] = s.running.front();
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace kforge::scheduler
