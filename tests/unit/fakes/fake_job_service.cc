#include "fakes/fake_job_service.h"

#include <algorithm>

#include "kforge/model/serialize.h"

namespace kforge::testing {

int64_t FakeJobService::now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void FakeJobService::note_blocking_call() {
  blocking_threads_.insert(std::this_thread::get_id());
}

StatusOr<model::JobRecord> FakeJobService::submit(model::JobRequest request,
                                                  const jobs::Caller& caller) {
  std::lock_guard lock(mu_);
  note_blocking_call();
  if (!submit_error_.is_ok()) return submit_error_;
  if (!request.device.empty() && request.device != "cpu" && request.device != "cuda:0") {
    return invalid_argument("unknown device '" + request.device + "'", "device");
  }
  if (!request.seed) request.seed = 12345 + next_id_;
  Job job;
  job.record.id = "job-" + std::to_string(next_id_++);
  job.record.kind = request.kind;
  job.record.state = model::JobState::kQueued;
  job.record.request = model::to_request_json(request);
  job.record.device = request.device.empty() ? "cpu" : request.device;
  job.record.created_ms = now_ms();
  job.record.submitter = caller.principal.name;
  job.record.process_bound = caller.process_bound;
  job.request = std::move(request);
  job.client = caller.client;
  model::JobRecord record = job.record;
  order_.push_back(record.id);
  jobs_.emplace(record.id, std::move(job));
  changed_.notify_all();
  return record;
}

StatusOr<model::JobRecord> FakeJobService::get(const std::string& id) {
  std::lock_guard lock(mu_);
  note_blocking_call();
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("no job with id '" + id + "'");
  return it->second.record;
}

StatusOr<uint64_t> FakeJobService::when_done(const std::string& id, DoneCallback done) {
  model::JobRecord finished;
  uint64_t sub = 0;
  {
    std::lock_guard lock(mu_);
    note_blocking_call();
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return not_found("no job with id '" + id + "'");
    sub = next_id_++;
    if (!model::is_terminal(it->second.record.state)) {
      waiters_[sub] = Waiter{id, std::move(done)};
      changed_.notify_all();
      return sub;
    }
    finished = it->second.record;
  }
  done(finished);  // already terminal: immediately, on this thread
  return sub;
}

StatusOr<uint64_t> FakeJobService::on_progress(const std::string& id, ProgressCallback progress) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("no job with id '" + id + "'");
  if (model::is_terminal(it->second.record.state)) {
    return failed_precondition("job '" + id + "' has finished");
  }
  uint64_t sub = next_id_++;
  watchers_[sub] = ProgressWatcher{id, std::move(progress)};
  return sub;
}

void FakeJobService::unsubscribe(uint64_t subscription) {
  DoneCallback dropped_done;
  ProgressCallback dropped_progress;
  {
    std::lock_guard lock(mu_);
    if (auto it = waiters_.find(subscription); it != waiters_.end()) {
      dropped_done = std::move(it->second.done);
      waiters_.erase(it);
    }
    if (auto it = watchers_.find(subscription); it != watchers_.end()) {
      dropped_progress = std::move(it->second.progress);
      watchers_.erase(it);
    }
    changed_.notify_all();
  }
  // The callbacks (and whatever they hold) are destroyed here, without the lock.
}

StatusOr<std::vector<jobs::JobService::DoneCallback>> FakeJobService::terminate(
    const std::string& id, model::JobState state, Json result, std::string error) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("no job with id '" + id + "'");
  model::JobRecord& record = it->second.record;
  if (model::is_terminal(record.state)) return failed_precondition("job already finished");
  if (record.started_ms == 0) record.started_ms = now_ms();
  record.state = state;
  record.result = std::move(result);
  record.error = std::move(error);
  record.finished_ms = now_ms();
  record.attempts = std::max(record.attempts, 1);
  std::vector<DoneCallback> callbacks;
  for (auto w = waiters_.begin(); w != waiters_.end();) {
    if (w->second.job_id == id) {
      callbacks.push_back(std::move(w->second.done));
      w = waiters_.erase(w);
    } else {
      ++w;
    }
  }
  for (auto w = watchers_.begin(); w != watchers_.end();) {
    w = w->second.job_id == id ? watchers_.erase(w) : std::next(w);
  }
  changed_.notify_all();
  return callbacks;
}

Status FakeJobService::cancel(const std::string& id, const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    note_blocking_call();
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return not_found("no job with id '" + id + "'");
    if (model::is_terminal(it->second.record.state)) return Status::ok();
  }
  auto callbacks = terminate(id, model::JobState::kCancelled, Json(), reason);
  if (!callbacks.is_ok()) return Status::ok();  // finished concurrently
  model::JobRecord record = get(id).value();
  for (auto& cb : *callbacks)
    cb(record);
  return Status::ok();
}

Json FakeJobService::stats() {
  std::lock_guard lock(mu_);
  note_blocking_call();
  Json by_state = Json::object();
  for (const auto& [id, job] : jobs_) {
    std::string state(model::to_string(job.record.state));
    by_state[state] = by_state.value(state, 0) + 1;
  }
  return Json{{"jobs", by_state}, {"total_jobs", jobs_.size()}, {"waiters", waiters_.size()}};
}

void FakeJobService::set_health_status(std::string status) {
  std::lock_guard lock(mu_);
  health_status_ = std::move(status);
}

Json FakeJobService::health() {
  std::lock_guard lock(mu_);
  ++health_calls_;
  return Json{{"status", health_status_}, {"devices", Json::array({Json{{"device", "cpu"}}})}};
}

StatusOr<int64_t> FakeJobService::cleanup(std::chrono::seconds older_than) {
  std::lock_guard lock(mu_);
  note_blocking_call();
  const int64_t cutoff =
      now_ms() - std::chrono::duration_cast<std::chrono::milliseconds>(older_than).count();
  int64_t deleted = 0;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const model::JobRecord& r = it->second.record;
    if (model::is_terminal(r.state) && r.finished_ms < cutoff) {
      order_.erase(std::remove(order_.begin(), order_.end(), r.id), order_.end());
      it = jobs_.erase(it);
      ++deleted;
    } else {
      ++it;
    }
  }
  return deleted;
}

void FakeJobService::set_submit_error(Status status) {
  std::lock_guard lock(mu_);
  submit_error_ = std::move(status);
}

Status FakeJobService::start(const std::string& id) {
  std::vector<ProgressCallback> to_call;
  jobs::JobProgress event;
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return not_found("no job with id '" + id + "'");
    if (it->second.record.state != model::JobState::kQueued) {
      return failed_precondition("job is not queued");
    }
    it->second.record.state = model::JobState::kRunning;
    it->second.record.started_ms = now_ms();
    it->second.record.attempts += 1;
    for (auto& [sub, w] : watchers_) {
      if (w.job_id == id) to_call.push_back(w.progress);
    }
    event = jobs::JobProgress{id, "starting", "", 0.0};
  }
  for (auto& cb : to_call)
    cb(event);
  return Status::ok();
}

Status FakeJobService::finish(const std::string& id, Json result) {
  KF_ASSIGN_OR_RETURN(auto callbacks,
                      terminate(id, model::JobState::kSucceeded, std::move(result), std::string()));
  KF_ASSIGN_OR_RETURN(model::JobRecord record, get(id));
  for (auto& cb : callbacks)
    cb(record);
  return Status::ok();
}

Status FakeJobService::fail(const std::string& id, std::string error) {
  KF_ASSIGN_OR_RETURN(auto callbacks,
                      terminate(id, model::JobState::kFailed, Json(), std::move(error)));
  KF_ASSIGN_OR_RETURN(model::JobRecord record, get(id));
  for (auto& cb : callbacks)
    cb(record);
  return Status::ok();
}

Status FakeJobService::report_progress(const std::string& id, std::string phase, double fraction) {
  std::vector<ProgressCallback> to_call;
  {
    std::lock_guard lock(mu_);
    if (jobs_.find(id) == jobs_.end()) return not_found("no job with id '" + id + "'");
    for (auto& [sub, w] : watchers_) {
      if (w.job_id == id) to_call.push_back(w.progress);
    }
  }
  jobs::JobProgress event{id, std::move(phase), "", fraction};
  for (auto& cb : to_call)
    cb(event);
  return Status::ok();
}

Status FakeJobService::age_finished_job(const std::string& id, std::chrono::seconds age) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("no job with id '" + id + "'");
  if (!model::is_terminal(it->second.record.state)) return failed_precondition("job not finished");
  it->second.record.finished_ms =
      now_ms() - std::chrono::duration_cast<std::chrono::milliseconds>(age).count();
  return Status::ok();
}

std::vector<std::string> FakeJobService::job_ids() const {
  std::lock_guard lock(mu_);
  return order_;
}

std::optional<model::JobRequest> FakeJobService::submitted_request(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.request;
}

std::optional<std::string> FakeJobService::submitted_client(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.client;
}

size_t FakeJobService::waiter_count() const {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

bool FakeJobService::wait_for_waiters(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return waiters_.size() == n; });
}

bool FakeJobService::wait_for_jobs(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return order_.size() >= n; });
}

std::set<std::thread::id> FakeJobService::blocking_call_threads() const {
  std::lock_guard lock(mu_);
  return blocking_threads_;
}

int FakeJobService::health_calls() const {
  std::lock_guard lock(mu_);
  return health_calls_;
}

}  // namespace kforge::testing
