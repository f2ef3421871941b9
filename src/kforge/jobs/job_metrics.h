// What GET /metrics reports about finished jobs since the server started: counts by state
// and kernel type, and latency histograms of each phase a worker reported (`phases_ms`,
// docs/worker-protocol.md) and of the whole run. The rest of /metrics (jobs queued and
// running, queue depth and bytes, worker restarts, device busy time) is read from the live
// service when a scrape comes (JobServiceImpl::prometheus_metrics).
//
// Thread-safety: JobMetrics is thread-safe.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/jobs/prometheus_text.h"
#include "kforge/model/job.h"

namespace kforge::jobs {

class JobMetrics {
 public:
  // Upper bounds (seconds) of the latency histograms' buckets.
  static const std::vector<double>& latency_buckets();

  // One finished job: its kernel type (the candidate's), terminal state, worker result (may
  // be null or lack phases_ms) and run time (started -> finished; negative when it never
  // ran on a device).
  void job_finished(const std::string& kernel_type, model::JobState state, const Json& result,
                    double run_s);

  // Writes kforge_jobs_finished_total, kforge_job_phase_seconds and kforge_job_run_seconds.
  void write(PrometheusText& out) const;

 private:
  mutable Mutex mu_;
  // (state, kernel_type) -> jobs.
  std::map<std::pair<std::string, std::string>, int64_t> finished_ GUARDED_BY(mu_);
  // (phase, kernel_type) -> latencies.
  std::map<std::pair<std::string, std::string>, HistogramData> phases_ GUARDED_BY(mu_);
  std::map<std::string, HistogramData> runs_ GUARDED_BY(mu_);  // kernel_type -> run times
};

}  // namespace kforge::jobs
