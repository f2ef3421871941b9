// Scheduler: one slot per device, `depth` runner threads per slot (1 by default: one job
// per device at a time).
//
// A job is queued for a target: a concrete device ("cpu", "cuda:1") or "gpu" (whichever
// GPU frees first). Each runner takes the oldest job it may run (its own queue, and for
// GPUs the shared "gpu" queue) and calls the run function on its own thread, so waiting
// jobs never block a network thread. With depth N > 1 (pipelined stages, issue 13) up to N
// jobs of a device are in flight at once; the run function must then keep their timed
// regions apart (workers/device_gate.h: a shared grant to overlap, an exclusive one to time).
//
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"

namespace kforge::scheduler {

inline constexpr std::string_view kAnyGpu = "gpu";

struct DeviceSlotInfo {
  std::string name;  // "cpu" or "cuda:N"
  bool is_gpu = false;
  int depth = 1;  // jobs in flight at once on this device (runner threads); at least 1
};

class Scheduler {
 public:
  // Runs one job on `device`; blocks the runner thread until the job is finished. It calls
  // job_ended(job_id) before it tells anyone that the job ended (when it does not, the
  // runner counts the job when the function returns).
  using RunFn = std::function<void(const std::string& job_id, const std::string& device)>;
  // Called once on each runner thread before it takes jobs (to warm the device's workers).
  using PrepareFn = std::function<void(const std::string& device)>;

  Scheduler(std::vector<DeviceSlotInfo> devices, RunFn run, PrepareFn prepare);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Maps a requested device to a queue target: "" / "auto" -> "gpu" when there is a GPU,
  // else "cpu"; "gpu"/"cuda" -> "gpu"; "cuda:N"/"cpu" must exist. kInvalidArgument
  // (field "device") naming the available devices otherwise.
  StatusOr<std::string> resolve_target(std::string_view requested) const;

  // Queues a job for a target returned by resolve_target.
  void enqueue(const std::string& job_id, const std::string& target);
  // Removes a job that has not started; false if it is not queued (running or unknown).
  bool remove(const std::string& job_id);
  // The run function's job `job_id` is over: its device counts it (jobs_run, busy time, no
  // longer running) from now on, so whoever the run function then tells that the job ended
  // reads device_status() with the job counted. Nothing for a job not running here, or
  // already counted.
  void job_ended(const std::string& job_id);

  void start();
  // Stops taking jobs and joins the runners (after their current job).
  void stop();

  size_t queue_depth() const;
  // Per device: {name, busy, current_job, running, depth, jobs_run, busy_ms, utilisation,
  // queued}. busy_ms counts the time at least one job was in flight.
  Json device_status() const;
  const std::vector<DeviceSlotInfo>& devices() const { return devices_; }

 private:
  struct Queued {
    uint64_t seq;
    std::string job_id;
    std::string target;
  };
  struct SlotState {
    bool busy = false;                 // running is not empty
    std::vector<std::string> running;  // jobs in flight, oldest first
    bool prepared = false;             // lane 0 ran prepare_ (the other lanes wait for it)
    int64_t jobs_run = 0;
    std::chrono::steady_clock::duration busy_time{};
    std::chrono::steady_clock::time_point busy_since{};
  };

  // `lane` 0 prepares the device's workers before it takes jobs.
  void runner_loop(size_t slot, int lane);
  // The index in queue_ of the oldest job slot `slot` may run, or -1.
  long pick_locked(size_t slot) const REQUIRES(mu_);
  // Whether another GPU has fewer jobs in flight than `slot` and a free runner.
  bool another_gpu_less_busy_locked(size_t slot) const REQUIRES(mu_);
  // Counts `job_id` as ended on slot `slot` if it is still running there.
  void end_locked(size_t slot, const std::string& job_id) REQUIRES(mu_);

  const std::vector<DeviceSlotInfo> devices_;
  const RunFn run_;
  const PrepareFn prepare_;
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_ GUARDED_BY(mu_);
  std::vector<SlotState> slots_ GUARDED_BY(mu_);
  uint64_t next_seq_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> runners_;  // touched by start/stop only
};

}  // namespace kforge::scheduler
