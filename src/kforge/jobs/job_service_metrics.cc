// JobServiceImpl::prometheus_metrics (GET /metrics): the live state of the service (jobs
// queued and running by kernel type, the queue, workers, devices) beside the counters and
// histograms of finished jobs (job_metrics.h). Every name is documented in
// docs/rest-api.md "GET /metrics".
#include <map>
#include <utility>

#include "kforge/common/thread_annotations.h"
#include "kforge/jobs/job_service_impl.h"
#include "kforge/jobs/prometheus_text.h"

namespace kforge::jobs {
namespace {

void write_devices(PrometheusText& out, const Json& devices) {
  out.family("kforge_device_busy", "gauge", "1 while the device runs a job, else 0.");
  for (const auto& d : devices) {
    out.sample("kforge_device_busy",
               {{"device", d.value("name", "")}, {"kind", d.value("kind", "")}},
               d.value("busy", false) ? 1 : 0);
  }
  out.family("kforge_device_busy_seconds_total", "counter",
             "Time each device spent running jobs since the server started.");
  for (const auto& d : devices) {
    out.sample("kforge_device_busy_seconds_total",
               {{"device", d.value("name", "")}, {"kind", d.value("kind", "")}},
               d.value("busy_ms", 0.0) / 1000.0);
  }
  out.family("kforge_device_jobs_total", "counter",
             "Jobs each device has run since the server started.");
  for (const auto& d : devices) {
    out.sample("kforge_device_jobs_total",
               {{"device", d.value("name", "")}, {"kind", d.value("kind", "")}},
               d.value("jobs_run", 0.0));
  }
}

}  // namespace

StatusOr<std::string> JobServiceImpl::prometheus_metrics() {
  KF_ASSIGN_OR_RETURN(auto stored, store_->job_summary());
  std::map<std::pair<std::string, std::string>, int64_t> live;  // (state, kernel_type) -> jobs
  double queue_jobs = 0;
  double queue_bytes = 0;
  QueueLimits limits;
  {
    MutexLock lock(mu_);
    for (const auto& [id, a] : active_)
      ++live[{std::string(to_string(a.record.state)), a.kernel_type}];
    queue_jobs = static_cast<double>(quota_.jobs());
    queue_bytes = static_cast<double>(quota_.bytes());
    limits = quota_.limits();
  }
  PrometheusText out;
  out.family("kforge_jobs", "gauge",
             "Jobs this server holds queued or running now, by state and kernel type.");
  for (const auto& [key, n] : live) {
    out.sample("kforge_jobs", {{"state", key.first}, {"kernel_type", key.second}},
               static_cast<double>(n));
  }
  out.family("kforge_jobs_stored", "gauge", "Jobs in the store by state (all kernel types).");
  for (model::JobState s :
       {model::JobState::kQueued, model::JobState::kRunning, model::JobState::kSucceeded,
        model::JobState::kFailed, model::JobState::kCancelled}) {
    auto it = stored.find(s);
    out.sample("kforge_jobs_stored", {{"state", std::string(to_string(s))}},
               it != stored.end() ? static_cast<double>(it->second.count) : 0.0);
  }
  out.family("kforge_jobs_submitted_total", "counter", "Jobs accepted since the server started.");
  out.sample("kforge_jobs_submitted_total", {}, static_cast<double>(submitted_.load()));
  out.family("kforge_jobs_recovered_total", "counter",
             "Unfinished jobs taken back from the store at start.");
  out.sample("kforge_jobs_recovered_total", {}, static_cast<double>(recovered_.load()));
  job_metrics_.write(out);

  out.family("kforge_queue_depth", "gauge", "Jobs waiting in the scheduler for a device.");
  out.sample("kforge_queue_depth", {}, static_cast<double>(scheduler_->queue_depth()));
  out.family("kforge_queue_jobs", "gauge", "Unfinished jobs counted against the queue limits.");
  out.sample("kforge_queue_jobs", {}, queue_jobs);
  out.family("kforge_queue_bytes", "gauge", "Bytes of the unfinished jobs' stored requests.");
  out.sample("kforge_queue_bytes", {}, queue_bytes);
  out.family("kforge_queue_max_jobs", "gauge", "The --max-queued-jobs limit.");
  out.sample("kforge_queue_max_jobs", {}, static_cast<double>(limits.max_jobs));
  out.family("kforge_queue_max_bytes", "gauge", "The --max-queued-bytes limit.");
  out.sample("kforge_queue_max_bytes", {}, static_cast<double>(limits.max_bytes));

  out.family("kforge_worker_restarts_total", "counter",
             "Worker processes (zygotes, native workers) started again after they died.");
  std::vector<std::pair<Labels, Json>> workers;
  for (const auto& d : devices_) {
    for (const auto& [type, w] : d.by_type)
      workers.emplace_back(Labels{{"device", d.device.name}, {"worker", type}}, w->status());
  }
  for (const auto& [labels, s] : workers)
    out.sample("kforge_worker_restarts_total", labels, s.value("restarts", 0.0));
  out.family("kforge_worker_child_crashes_total", "counter",
             "Job processes of a worker that died without a result.");
  for (const auto& [labels, s] : workers)
    out.sample("kforge_worker_child_crashes_total", labels, s.value("child_crashes", 0.0));
  write_devices(out, scheduler_->device_status());

  out.family("kforge_uptime_seconds", "gauge", "Seconds since the server started.");
  out.sample("kforge_uptime_seconds", {},
             std::chrono::duration<double>(clock_.now() - started_at_).count());
  out.family("kforge_build_info", "gauge", "The server's version (the value is always 1).");
  out.sample("kforge_build_info", {{"version", options_.version}}, 1);
  return out.text();
}

}  // namespace kforge::jobs
