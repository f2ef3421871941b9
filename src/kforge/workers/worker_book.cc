#include "kforge/workers/worker_book.h"

#include "kforge/workers/sandbox_policy.h"

namespace kforge::workers {

void WorkerBook::set_state(WorkerState state, std::string error) {
  MutexLock lock(mu_);
  state_ = state;
  if (!error.empty()) last_error_ = std::move(error);
}

WorkerState WorkerBook::state() const {
  MutexLock lock(mu_);
  return state_;
}

void WorkerBook::note_error(std::string error) {
  MutexLock lock(mu_);
  last_error_ = std::move(error);
}

void WorkerBook::note_started() {
  MutexLock lock(mu_);
  ++counters_.processes_started;
}

void WorkerBook::note_restart() {
  MutexLock lock(mu_);
  ++counters_.restarts;
}

void WorkerBook::note_lost_before_ready(const std::string& why) {
  MutexLock lock(mu_);
  ++counters_.child_crashes;
  last_error_ = why;
}

void WorkerBook::note_ready(const Json& ready) {
  MutexLock lock(mu_);
  child_device_ = ready.value("device", Json());
  child_warmup_ms_ = ready.value("warmup_ms", 0.0);
  child_warmup_steps_ = ready.value("warmup_steps_ms", Json::object());
  candidate_warmup_ = ready.value("candidate", Json());
  if (ready.contains("warmup_errors") && ready["warmup_errors"].is_object() &&
      !ready["warmup_errors"].empty()) {
    last_error_ = "warm-up: " + ready["warmup_errors"].dump();
  }
}

void WorkerBook::note_job_end(ChildJobEnd::Kind kind, WorkerState after) {
  MutexLock lock(mu_);
  ++counters_.jobs_run;
  switch (kind) {
    case ChildJobEnd::Kind::kCrashed:
    case ChildJobEnd::Kind::kMemoryLimit:
    case ChildJobEnd::Kind::kProtocolError:
      ++counters_.child_crashes;
      break;
    case ChildJobEnd::Kind::kTimeout:
      ++counters_.timeouts;
      break;
    case ChildJobEnd::Kind::kResult:
    case ChildJobEnd::Kind::kCancelled:
      break;
  }
  state_ = after;
}

WorkerBook::Counters WorkerBook::counters() const {
  MutexLock lock(mu_);
  return counters_;
}

void WorkerBook::fill_status(Json& s) const {
  MutexLock lock(mu_);
  s["state"] = worker_state_name(state_);
  s["processes_started"] = counters_.processes_started;
  s["restarts"] = counters_.restarts;
  s["jobs_run"] = counters_.jobs_run;
  s["child_crashes"] = counters_.child_crashes;
  s["timeouts"] = counters_.timeouts;
  s["child_warmup_ms"] = child_warmup_ms_;
  s["child_warmup_steps_ms"] = child_warmup_steps_;
  if (candidate_warmup_.is_object()) {
    s["child_candidate_warmup_ms"] = candidate_warmup_.value("warmup_ms", Json());
    s["child_candidate_warmup_steps_ms"] =
        candidate_warmup_.value("warmup_steps_ms", Json::object());
  }
  if (!child_device_.is_null()) s["child_device"] = child_device_;
  if (!last_error_.empty()) s["last_error"] = last_error_;
}

Json job_message_for(const WorkerJob& job, const ChildSandbox& sandbox,
                     const std::filesystem::path& cache_dir) {
  Json spec = job.spec;
  spec["scratch_dir"] = sandbox.judge_dir.string();
  spec["cache_dir"] = cache_dir.string();
  return Json{{"type", "job"}, {"job", std::move(spec)}};
}

WorkerOutcome outcome_of(const ChildJobEnd& end, Json result) {
  if (end.kind == ChildJobEnd::Kind::kCancelled) {
    return {WorkerOutcome::Kind::kCancelled, std::move(result), "cancelled"};
  }
  return {WorkerOutcome::Kind::kResult, std::move(result), {}};
}

}  // namespace kforge::workers
