// The statistics of the kernel evaluation server kforge replaces (docs/compatibility.md §1),
// which its clients read from GET /stats and GET /health: `job_stats` from the store, and the
// in-memory counters `compilation_metrics`, `profiling_metrics`, `gpu_utilization` and
// `throughput` since the server started (as there).
//
// Thread-safety: LegacyMetrics is thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/model/job.h"
#include "kforge/store/store.h"

namespace kforge::jobs {

// What one finished job contributes to the counters (times in seconds; negative = unknown).
struct FinishedJobSample {
  std::string device;
  model::JobState state = model::JobState::kSucceeded;
  const Json* result = nullptr;  // the worker result; may be null
  bool started = false;          // it ran on a device (else it ended while queued)
  double end_to_end_s = 0;       // created -> finished
  double run_s = 0;              // started -> finished
  double compile_s = -1;         // the loading phase (import + compile)
  double timing_s = -1;          // the timing phases
};

// Count, sum, min and max of a series of durations (seconds), in constant memory.
struct DurationSummary {
  int64_t count = 0;
  double total = 0, min = 0, max = 0;
  void add(double seconds);
  double average() const { return count > 0 ? total / static_cast<double>(count) : 0.0; }
};

class LegacyMetrics {
 public:
  void job_submitted(int64_t now_ms);
  void job_started(const std::string& device, double queue_wait_s);
  void job_finished(const FinishedJobSample& sample);

  // {compilation_metrics, profiling_metrics, gpu_utilization, throughput, timestamp}.
  Json snapshot(double uptime_s, int64_t now_ms) const;

 private:
  mutable Mutex mu_;
  int64_t compilations_ GUARDED_BY(mu_) = 0;
  int64_t compilations_ok_ GUARDED_BY(mu_) = 0;
  int64_t cache_hits_ GUARDED_BY(mu_) = 0;
  int64_t cache_misses_ GUARDED_BY(mu_) = 0;
  DurationSummary compile_times_ GUARDED_BY(mu_);
  int64_t profilings_ GUARDED_BY(mu_) = 0;
  int64_t profilings_ok_ GUARDED_BY(mu_) = 0;
  int64_t correct_ GUARDED_BY(mu_) = 0;
  int64_t incorrect_ GUARDED_BY(mu_) = 0;
  DurationSummary profile_times_ GUARDED_BY(mu_);
  std::map<std::string, double> profile_time_by_device_ GUARDED_BY(mu_);
  int64_t acquisitions_ GUARDED_BY(mu_) = 0;
  int64_t releases_ GUARDED_BY(mu_) = 0;
  DurationSummary wait_times_ GUARDED_BY(mu_);
  double device_time_s_ GUARDED_BY(mu_) = 0;
  std::map<std::string, double> device_time_by_device_ GUARDED_BY(mu_);
  int64_t requests_ GUARDED_BY(mu_) = 0;
  int64_t completed_ GUARDED_BY(mu_) = 0;
  int64_t failed_ GUARDED_BY(mu_) = 0;
  DurationSummary end_to_end_times_ GUARDED_BY(mu_);
  std::deque<int64_t> recent_submits_ms_ GUARDED_BY(mu_);  // submit times of the last 5 minutes
};

// {total_jobs, by_status, average_age}: the old server's job_stats. `summary` counts the
// stored jobs by state; `running_phases` are the progress phases of the running jobs this
// server knows (they split "running" into compiling, validating and profiling).
Json legacy_job_stats(const std::map<model::JobState, store::Store::StateSummary>& summary,
                      const std::vector<std::string>& running_phases, int64_t now_ms);

}  // namespace kforge::jobs
