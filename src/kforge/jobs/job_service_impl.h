// The engine behind the JobService facade: store + scheduler + per-device workers.
//
// Durability: a job is written to the store before submit() returns. At start(), jobs the
// store still has as queued or running (the server died) are queued again, up to
// `max_attempts` starts each; past that they fail with the reason. A process-bound job
// (Caller::process_bound) is not: the process that alone could receive its result is gone
// (this one holds the store now), so it ends as cancelled, saying so, and leaves the devices
// to work someone waits for.
//
// Shared queue (the store is a store::SharedQueue, e.g. PostgreSQL): several servers ("nodes")
// share the store's queue; no job is process-bound there (whichever node runs it, the
// submitting process may still be alive). submit() only inserts the job; a coordinator thread
// claims queued jobs for this node's idle devices, renews their leases, recovers the jobs of nodes
// whose lease expired (under the same `max_attempts` rule as a restart) and wakes when_done waiters
// when a job finishes on any node (the store's events, and a poll every 2 s). Queue limits
// count the jobs this node accepted until they finish, wherever they run.
//
// Memory: an unfinished job costs a model::JobRecord without its request (ids, state, times) and
// its quota entry; the request itself stays in the store and is read back when the job
// starts, so queued work is bounded by QueueLimits in the store's bytes, not held in RAM.
//
// Where its methods live: job_service_impl.cc (start, submit, run, finish, cancel),
// job_service_events.cc (progress, changes and their subscriptions), job_service_coordinator.cc
// (the shared queue's coordinator), job_service_views.cc (get, list_jobs, health, stats) and
// job_service_metrics.cc (GET /metrics).
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kforge/common/clock.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/jobs/job_metrics.h"
#include "kforge/jobs/job_service.h"
#include "kforge/jobs/legacy_stats.h"
#include "kforge/jobs/queue_quota.h"
#include "kforge/jobs/reference_reuse.h"
#include "kforge/jobs/result_caps.h"
#include "kforge/scheduler/scheduler.h"
#include "kforge/store/shared_queue.h"
#include "kforge/store/store.h"
#include "kforge/workers/device_gate.h"
#include "kforge/workers/worker.h"

namespace kforge::jobs {

// The workers of one device, by type ("python", "cuda").
struct DeviceWorkers {
  scheduler::DeviceSlotInfo device;
  std::map<std::string, std::unique_ptr<workers::Worker>> by_type;
  Json facts = Json::object();  // inventory (GPU name, memory, ...), reported by stats/health
  // GPUs: the device's measured peaks (device_peaks.h), called once on its runner thread
  // before its first job. Null on cpu.
  std::function<StatusOr<Json>()> measure_peaks;
  // Pipelined stages: the device's grant (its shared and exclusive holders, reported by
  // stats/health as "device_gate"). Null without pipelining.
  std::shared_ptr<workers::DeviceGate> gate;
};

class JobServiceImpl final : public JobService {
 public:
  struct Options {
    int max_attempts = 3;  // starts per job across restarts
    QueueLimits queue;     // unfinished (queued + running) jobs; submit() refuses beyond
    std::string version = "dev";
    Json sandbox = Json::object();  // SandboxPolicy::describe(), shown by health()
    // Nsight Compute device metrics for requests that do not say (--device-metrics,
    // ENABLE_DEVICE_METRICS=true); the worker spec carries `device_metrics` (ncu, sections).
    bool device_metrics_default = false;
    std::string ncu;  // the ncu executable; empty when there is none
    // Why no job can have device metrics (ncu missing, the GPU's counters closed to the
    // jobs' processes: gpu_counters.h); "" when they can.
    std::string device_metrics_unavailable;
    // The reference directory (SandboxPolicy::reference_cache_dir): a batch's
    // reference results are computed once and reused there (reference_reuse.h). Empty: off.
    std::filesystem::path reference_cache_dir;
    // Shared queue only: how often leases are renewed (a third of the store's lease).
    std::chrono::milliseconds heartbeat{10000};
    // What a finished job's result and error may hold (result_caps.h): applied before the
    // result is stored or sent to anyone.
    ResultLimits result_limits;
  };

  JobServiceImpl(Options options, std::unique_ptr<store::Store> store,
                 std::vector<DeviceWorkers> devices, const Clock& clock);
  ~JobServiceImpl() override;

  // Recovers unfinished jobs from the store and starts the device runners.
  Status start();
  // Stops taking jobs, cancels running ones' processes and stops the workers. Jobs still
  // queued stay queued in the store and run after the next start.
  void stop();

  StatusOr<model::JobRecord> submit(model::JobRequest request, const Caller& caller) override;
  StatusOr<model::JobRecord> get(const std::string& id) override;
  StatusOr<std::vector<model::JobRecord>> list_jobs(const model::JobQuery& query) override;
  StatusOr<uint64_t> when_done(const std::string& id, DoneCallback done) override;
  StatusOr<uint64_t> on_progress(const std::string& id, ProgressCallback progress) override;
  StatusOr<uint64_t> on_job_changes(ChangeCallback changed) override;
  void unsubscribe(uint64_t subscription) override;
  Status cancel(const std::string& id, const std::string& reason) override;
  Json stats() override;
  Json health() override;
  // Defined in job_service_metrics.cc.
  StatusOr<std::string> prometheus_metrics() override;
  StatusOr<int64_t> cleanup(std::chrono::seconds older_than) override;

 private:
  struct Active {
    model::JobRecord record;   // current state (no request, no result: both live in the store)
    std::string client;        // who submitted it (the quota key)
    size_t request_bytes = 0;  // its stored request, for the quota
    std::string target;        // scheduler target
    std::string kernel_type;   // the candidate's, for /metrics
    std::shared_ptr<workers::CancelToken> cancel;  // set while running
    std::string cancel_reason;
    bool cancelled_by_shutdown = false;  // stop(): the job goes back to the queue, not cancelled
    bool claimed = false;  // shared queue: claimed from the store (already running there, not
                           // counted in this node's quota)
    // The worker type ("python" or "cuda") whose queued jobs count this one until it starts
    // (queued_for_); empty once it is not counted.
    std::string queued_as;
    double last_fraction = 0;
    // When the worker reported each phase first (Unix ms, 0 = not yet): the loading phase is
    // the compilation time, the timing phases the profiling time.
    int64_t loading_ms = 0, checking_ms = 0, timing_ms = 0;
    std::map<uint64_t, DoneCallback> done_subs;
    std::map<uint64_t, ProgressCallback> progress_subs;
  };

  // Shared queue: a job this node accepted (or waits for) that it is not running.
  struct Watched {
    std::string client;        // the quota key; empty when not counted
    size_t request_bytes = 0;  // counted in the quota while the job is unfinished
    std::map<uint64_t, DoneCallback> done_subs;
    std::map<uint64_t, ProgressCallback> progress_subs;
  };

  void run_job(const std::string& job_id, const std::string& device);
  // Shared queue: the coordinator thread (claims, heartbeats, recovery, events).
  void coordinator_loop();
  void claim_for_idle_devices();
  // Calls the waiters of those watched jobs that have finished (read from the store).
  void resolve_watched(const std::vector<std::string>& ids);
  // Cancels a job this node runs or has claimed; false when it has no such job.
  bool cancel_if_local(const std::string& id, const std::string& reason);
  void prepare_device(const std::string& device);
  workers::Worker* pick_worker(const std::string& device, const model::JobRequest& request);
  Json worker_spec(const model::JobRecord& record, const model::JobRequest& request,
                   const std::string& device) const;
  bool wants_device_metrics(const model::JobRequest& request) const {
    return request.enable_device_metrics.value_or(options_.device_metrics_default);
  }
  // Roofline and device metrics (result_extras.h), added to a worker's result.
  void add_extras(Json& result, const model::JobRequest& request, const std::string& device);
  Json peaks_of(const std::string& device);
  // Caps the result and the error (Options::result_limits), writes the terminal state, removes
  // the job from active_ and notifies subscribers.
  void finish(const std::string& id, model::JobState state, Json result, std::string error);
  void publish_progress(const std::string& id, JobProgress progress);
  // Tells the on_job_changes listeners; without mu_.
  void publish_change(const JobChange& change);
  StatusOr<model::JobRequest> parse_stored_request(const model::JobRecord& record) const;
  // The request of an unfinished job, read back from the store.
  StatusOr<model::JobRequest> load_request(const std::string& job_id);
  // Removes an unfinished job from active_ and the quota.
  void forget_locked(std::map<std::string, Active>::iterator it) REQUIRES(mu_);
  // Counts a job that was just enqueued for `target` among the queued jobs of its worker
  // type ("python" when any of its kernels needs the Python worker).
  void count_queued_locked(Active& active, bool python) REQUIRES(mu_);
  // Stops counting it (it started, or left the queue).
  void uncount_queued_locked(Active& active) REQUIRES(mu_);
  // Tells the workers of type `type` on the devices `target` covers how many jobs are queued
  // for them (Worker::expect_jobs), so a pipelined device warms processes for a burst ahead.
  void tell_queued(const std::string& target, const std::string& type) EXCLUDES(mu_);

  const Options options_;
  const std::unique_ptr<store::Store> store_;
  std::vector<DeviceWorkers> devices_;
  const Clock& clock_;
  store::SharedQueue* const shared_;  // store_'s shared queue, or null
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  const std::chrono::steady_clock::time_point started_at_;

  Mutex mu_;
  std::map<std::string, Active> active_ GUARDED_BY(mu_);  // queued + running jobs
  // Queued (not yet started) jobs per (scheduler target, worker type).
  std::map<std::pair<std::string, std::string>, int> queued_for_ GUARDED_BY(mu_);
  QueueQuota quota_ GUARDED_BY(mu_);                                // what active_ holds
  std::map<uint64_t, std::string> subscription_ GUARDED_BY(mu_);    // id -> job id
  std::map<uint64_t, ChangeCallback> change_subs_ GUARDED_BY(mu_);  // on_job_changes
  uint64_t next_subscription_ GUARDED_BY(mu_) = 1;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::map<std::string, Json> peaks_ GUARDED_BY(mu_);       // device -> peaks or {"error": ...}
  std::map<std::string, Watched> watched_ GUARDED_BY(mu_);  // shared queue only
  std::thread coordinator_;                                 // shared queue only; started by start()
  std::atomic<int64_t> submitted_{0};
  std::atomic<int64_t> finished_{0};
  std::atomic<int64_t> recovered_{0};
  LegacyMetrics legacy_;  // the old server's /stats counters
  ReferenceReuse reuse_{options_.reference_cache_dir};
  JobMetrics job_metrics_;  // GET /metrics: finished jobs by state and kernel type, latencies
};

}  // namespace kforge::jobs
