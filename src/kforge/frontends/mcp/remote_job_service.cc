#include "kforge/frontends/mcp/remote_job_service.h"

#include <cmath>
#include <vector>

#include "kforge/common/iso8601.h"
#include "kforge/common/log.h"
#include "kforge/jobs/exec_result_view.h"
#include "kforge/jobs/job_view.h"
#include "kforge/model/serialize.h"

namespace kforge::frontends::mcp {

// A time field of a view: epoch seconds (a number), or an ISO-8601 string from an older
// kforge; 0 when absent.
int64_t view_time_ms(const Json& view, const char* key) {
  auto it = view.find(key);
  if (it == view.end()) return 0;
  if (it->is_number()) return static_cast<int64_t>(std::llround(it->get<double>() * 1000.0));
  if (it->is_string()) return parse_iso8601_ms(it->get<std::string>());
  return 0;
}

StatusOr<model::JobRecord> job_record_from_view(const Json& view) {
  if (!view.is_object() || !view.contains("job_id") || !view["job_id"].is_string()) {
    return io_error("the server's job answer has no job_id");
  }
  model::JobRecord job;
  job.id = view["job_id"].get<std::string>();
  auto state = jobs::job_state_of_view(view);
  if (!state) return io_error("the server's job answer has an unknown status");
  job.state = *state;
  job.kind =
      model::job_kind_from(view.value("kind", "evaluate")).value_or(model::JobKind::kEvaluate);
  job.device = view.value("device", "");
  if (auto e = view.find("error"); e != view.end() && e->is_string()) job.error = *e;
  job.attempts = view.value("attempts", 0);
  job.phase = view.value("phase", "");
  job.created_ms = view_time_ms(view, "created_at");
  job.started_ms = view_time_ms(view, "started_at");
  job.finished_ms = view_time_ms(view, "finished_at");
  if (auto r = view.find("kernel_exec_result"); r != view.end() && r->is_object() && !r->empty()) {
    job.result = *r;
    for (const char* key : jobs::kTopLevelResultFields) {
      if (auto it = view.find(key); it != view.end()) job.result[key] = *it;
    }
  }
  return job;
}

RemoteJobService::RemoteJobService(RestClient client, std::chrono::milliseconds poll_interval)
    : client_(std::move(client)), poll_interval_(poll_interval) {
  poller_ = std::thread([this] { poll_loop(); });
}

RemoteJobService::~RemoteJobService() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  poller_.join();
}

// The server counts the quota, and records the submitter, by this process's own token; the
// local caller stays local.
StatusOr<model::JobRecord> RemoteJobService::submit(model::JobRequest request,
                                                    const jobs::Caller& /*caller*/) {
  const Json body = model::to_request_json(request);
  const char* path =
      request.kind == model::JobKind::kCompare ? "/compare?wait=false" : "/evaluate?wait=false";
  KF_ASSIGN_OR_RETURN(Json view, client_.call_json("POST", path, &body));
  return job_record_from_view(view);
}

StatusOr<model::JobRecord> RemoteJobService::get(const std::string& id) {
  KF_ASSIGN_OR_RETURN(Json view, client_.call_json("GET", "/job/" + id));
  return job_record_from_view(view);
}

StatusOr<uint64_t> RemoteJobService::when_done(const std::string& id, DoneCallback done) {
  KF_ASSIGN_OR_RETURN(model::JobRecord job, get(id));
  if (model::is_terminal(job.state)) {
    done(job);
    return uint64_t{0};
  }
  MutexLock lock(mu_);
  uint64_t sub = next_id_++;
  watches_[sub] = Watch{id, std::move(done), nullptr, std::string(model::to_string(job.state))};
  cv_.notify_all();
  return sub;
}

StatusOr<uint64_t> RemoteJobService::on_progress(const std::string& id, ProgressCallback progress) {
  KF_ASSIGN_OR_RETURN(model::JobRecord job, get(id));
  if (model::is_terminal(job.state)) return failed_precondition("job " + id + " has finished");
  MutexLock lock(mu_);
  uint64_t sub = next_id_++;
  watches_[sub] = Watch{id, nullptr, std::move(progress), ""};
  cv_.notify_all();
  return sub;
}

void RemoteJobService::unsubscribe(uint64_t subscription) {
  MutexLock lock(mu_);
  watches_.erase(subscription);
}

void RemoteJobService::poll_loop() {
  MutexLock lock(mu_);
  while (!stopping_) {
    if (watches_.empty()) {
      lock.wait(cv_, [this]() REQUIRES(mu_) { return stopping_ || !watches_.empty(); });
      continue;
    }
    std::map<std::string, std::vector<uint64_t>> by_job;
    for (const auto& [sub, w] : watches_)
      by_job[w.job_id].push_back(sub);
    lock.unlock();
    for (const auto& [job_id, subs] : by_job) {
      auto job = get(job_id);
      if (!job.is_ok()) {
        KF_LOG_WARN("mcp --server: polling job {} failed: {}", job_id, job.status().to_string());
        continue;
      }
      const std::string state(model::to_string(job->state));
      for (uint64_t sub : subs) {
        DoneCallback done;
        ProgressCallback progress;
        {
          MutexLock relock(mu_);
          auto it = watches_.find(sub);
          if (it == watches_.end()) continue;
          if (it->second.done && model::is_terminal(job->state)) {
            done = std::move(it->second.done);
            watches_.erase(it);
          } else if (it->second.progress && it->second.last_state != state) {
            it->second.last_state = state;
            progress = it->second.progress;
            if (model::is_terminal(job->state)) watches_.erase(it);
          }
        }
        if (done) done(*job);
        if (progress) {
          double fraction = job->state == model::JobState::kQueued    ? 0.01
                            : job->state == model::JobState::kRunning ? 0.3
                                                                      : 1.0;
          progress(jobs::JobProgress{job_id, state, "on " + job->device, fraction});
        }
      }
    }
    lock.lock();
    lock.wait_for(cv_, poll_interval_, [this]() REQUIRES(mu_) { return stopping_; });
  }
}

Status RemoteJobService::cancel(const std::string& id, const std::string& reason) {
  const Json body = {{"reason", reason}};
  return client_.call_json("POST", "/job/" + id + "/cancel", &body).status();
}

Json RemoteJobService::stats() {
  auto stats = client_.call_json("GET", "/stats");
  if (stats.is_ok()) return std::move(stats).value();
  return Json{{"error", stats.status().to_string()},
              {"queue_depth", 0},
              {"jobs", Json::object()},
              {"devices", Json::array()}};
}

Json RemoteJobService::health() {
  auto health = client_.call_json("GET", "/health");
  if (health.is_ok()) return std::move(health).value();
  return Json{{"status", "unreachable"}, {"error", health.status().to_string()}};
}

StatusOr<int64_t> RemoteJobService::cleanup(std::chrono::seconds older_than) {
  const Json body = {{"older_than_seconds", older_than.count()}};
  KF_ASSIGN_OR_RETURN(Json r, client_.call_json("POST", "/admin/cleanup-jobs", &body));
  return r.value("deleted", int64_t{0});
}

}  // namespace kforge::frontends::mcp
