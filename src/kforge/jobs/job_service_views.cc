// What JobServiceImpl says of its jobs and of itself: get and list_jobs (a running job with
// its progress phase), health and stats (GET /health, GET /stats: devices, workers, queue,
// jobs by state, recent throughput; documented in docs/rest-api.md).
#include "kforge/jobs/job_access.h"
#include "kforge/jobs/job_service_impl.h"
#include "kforge/model/kernel_spec.h"

namespace kforge::jobs {

StatusOr<model::JobRecord> JobServiceImpl::get(const std::string& id) {
  {
    MutexLock lock(mu_);
    auto it = active_.find(id);
    if (it != active_.end()) return it->second.record;
  }
  KF_ASSIGN_OR_RETURN(auto stored, store_->get_job(id));
  if (!stored) return unknown_job(id);
  return *stored;
}

StatusOr<std::vector<model::JobRecord>> JobServiceImpl::list_jobs(const model::JobQuery& query) {
  KF_ASSIGN_OR_RETURN(std::vector<model::JobRecord> jobs, store_->list_jobs(query));
  MutexLock lock(mu_);
  for (model::JobRecord& job : jobs) {
    auto it = active_.find(job.id);
    if (it != active_.end() && it->second.record.state == job.state) {
      job.phase = it->second.record.phase;
    }
  }
  return jobs;
}

Json JobServiceImpl::health() {
  Json devices = Json::array();
  bool degraded = false;
  for (const auto& d : devices_) {
    Json workers = Json::object();
    for (const auto& [type, w] : d.by_type) {
      const kforge::workers::WorkerState state = w->state();
      if (state == kforge::workers::WorkerState::kFailed) degraded = true;
      workers[type] = kforge::workers::worker_state_name(state);
    }
    Json entry = {{"name", d.device.name}, {"workers", workers}, {"facts", d.facts}};
    if (d.measure_peaks) entry["peaks"] = peaks_of(d.device.name);
    if (d.gate) entry["device_gate"] = d.gate->status();
    devices.push_back(std::move(entry));
  }
  // The old server's keys: GPUs free to take a job, and its two services.
  int64_t gpus = 0;
  int64_t idle_gpus = 0;
  for (const auto& d : scheduler_->device_status()) {
    if (d.value("kind", "") != "gpu") continue;
    ++gpus;
    if (!d.value("busy", false)) ++idle_gpus;
  }
  const char* service = degraded ? "degraded" : "healthy";
  double uptime = std::chrono::duration<double>(clock_.now() - started_at_).count();
  return Json{{"status", service},
              {"version", options_.version},
              {"uptime_s", uptime},
              {"gpu_manager", {{"available_gpus", idle_gpus}, {"total_gpus", gpus}}},
              {"compilation_service",
               {{"status", service}, {"available_kernel_types", Json(model::kernel_type_names())}}},
              {"profiling_service",
               {{"status", service},
                {"devices", devices.size()},
                {"device_metrics",
                 {{"available", options_.device_metrics_unavailable.empty()},
                  {"ncu", options_.ncu.empty() ? Json(nullptr) : Json(options_.ncu)},
                  {"why_not", options_.device_metrics_unavailable.empty()
                                  ? Json(nullptr)
                                  : Json(options_.device_metrics_unavailable)}}}}},
              {"devices", devices},
              {"sandbox", options_.sandbox}};
}

Json JobServiceImpl::stats() {
  Json by_state = Json::object();
  for (model::JobState s :
       {model::JobState::kQueued, model::JobState::kRunning, model::JobState::kSucceeded,
        model::JobState::kFailed, model::JobState::kCancelled}) {
    by_state[std::string(to_string(s))] = 0;
  }
  const int64_t now_ms = clock_.unix_ms();
  Json job_stats = Json{{"total_jobs", 0}, {"by_status", Json::object()}, {"average_age", 0.0}};
  if (auto summary = store_->job_summary(); summary.is_ok()) {
    for (const auto& [s, n] : *summary)
      by_state[std::string(to_string(s))] = n.count;
    std::vector<std::string> phases;
    {
      MutexLock lock(mu_);
      for (const auto& [id, a] : active_) {
        if (a.record.state == model::JobState::kRunning) phases.push_back(a.record.phase);
      }
    }
    job_stats = legacy_job_stats(*summary, phases, now_ms);
  }
  Json devices = scheduler_->device_status();
  int64_t restarts = 0;
  int64_t crashes = 0;
  for (auto& d : devices) {
    for (const auto& dw : devices_) {
      if (dw.device.name != d["name"].get<std::string>()) continue;
      d["facts"] = dw.facts;
      if (dw.measure_peaks) d["peaks"] = peaks_of(dw.device.name);
      if (dw.gate) d["device_gate"] = dw.gate->status();
      Json workers = Json::object();
      for (const auto& [type, w] : dw.by_type) {
        Json s = w->status();
        restarts += s.value("restarts", int64_t{0});
        crashes += s.value("child_crashes", int64_t{0});
        workers[type] = std::move(s);
      }
      d["workers"] = std::move(workers);
    }
  }
  double uptime = std::chrono::duration<double>(clock_.now() - started_at_).count();
  Json queue;
  {
    MutexLock lock(mu_);
    const QueueLimits& l = quota_.limits();
    queue = Json{{"jobs", quota_.jobs()},
                 {"bytes", quota_.bytes()},
                 {"clients", quota_.clients()},
                 {"max_jobs", l.max_jobs},
                 {"max_bytes", l.max_bytes},
                 {"max_jobs_per_client", l.max_jobs_per_client},
                 {"max_bytes_per_client", l.max_bytes_per_client}};
  }
  Json out = legacy_.snapshot(uptime, now_ms);
  // A shared queue's depth is the store's (every node's queued jobs), not this node's.
  const Json queue_depth =
      shared_ != nullptr ? by_state["queued"] : Json(scheduler_->queue_depth());
  out.update(Json{{"job_stats", std::move(job_stats)},
                  {"uptime_s", uptime},
                  {"version", options_.version},
                  {"queue_depth", queue_depth},
                  {"queue", std::move(queue)},
                  {"jobs", by_state},
                  {"jobs_submitted", submitted_.load()},
                  {"jobs_finished", finished_.load()},
                  {"jobs_recovered", recovered_.load()},
                  {"worker_restarts", restarts},
                  {"child_crashes", crashes},
                  {"devices", devices}});
  return out;
}

}  // namespace kforge::jobs
