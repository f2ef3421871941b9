#include "kforge/jobs/job_service_impl.h"

#include <algorithm>

#include "kforge/common/log.h"
#include "kforge/common/random.h"
#include "kforge/jobs/job_access.h"
#include "kforge/jobs/ncu_report.h"
#include "kforge/jobs/result_extras.h"
#include "kforge/model/batch.h"
#include "kforge/model/job_spec.h"
#include "kforge/model/parse.h"
#include "kforge/model/serialize.h"

namespace kforge::jobs {
namespace {

std::vector<scheduler::DeviceSlotInfo> slot_infos(const std::vector<DeviceWorkers>& devices) {
  std::vector<scheduler::DeviceSlotInfo> out;
  out.reserve(devices.size());
  for (const auto& d : devices)
    out.push_back(d.device);
  return out;
}

bool uses_only_cuda(const model::JobRequest& r) {
  bool cuda = r.kernel.kernel_type == model::KernelType::kCuda;
  if (r.reference) cuda = cuda && r.reference->kernel_type == model::KernelType::kCuda;
  return cuda;
}

}  // namespace

JobServiceImpl::JobServiceImpl(Options options, std::unique_ptr<store::Store> store,
                               std::vector<DeviceWorkers> devices, const Clock& clock)
    : options_(std::move(options)),
      store_(std::move(store)),
      devices_(std::move(devices)),
      clock_(clock),
      shared_(store_->shared_queue()),
      started_at_(clock.now()),
      quota_(options_.queue) {
  scheduler_ = std::make_unique<scheduler::Scheduler>(
      slot_infos(devices_),
      [this](const std::string& id, const std::string& device) { run_job(id, device); },
      [this](const std::string& device) { prepare_device(device); });
}

JobServiceImpl::~JobServiceImpl() {
  stop();
}

StatusOr<model::JobRequest> JobServiceImpl::load_request(const std::string& job_id) {
  KF_ASSIGN_OR_RETURN(auto stored, store_->get_job(job_id));
  if (!stored) return not_found("job '" + job_id + "' is no longer in the store");
  return parse_stored_request(*stored);
}

void JobServiceImpl::forget_locked(std::map<std::string, Active>::iterator it) {
  if (!it->second.claimed) quota_.release(it->second.client, it->second.request_bytes);
  uncount_queued_locked(it->second);
  active_.erase(it);
}

void JobServiceImpl::count_queued_locked(Active& active, bool python) {
  active.queued_as = python ? "python" : "cuda";
  ++queued_for_[{active.target, active.queued_as}];
}

void JobServiceImpl::uncount_queued_locked(Active& active) {
  if (active.queued_as.empty()) return;
  auto it = queued_for_.find({active.target, active.queued_as});
  if (it != queued_for_.end() && --it->second <= 0) queued_for_.erase(it);
  active.queued_as.clear();
}

void JobServiceImpl::tell_queued(const std::string& target, const std::string& type) {
  for (auto& d : devices_) {
    const bool covered =
        d.device.name == target || (target == scheduler::kAnyGpu && d.device.is_gpu);
    if (!covered) continue;
    auto worker = d.by_type.find(type);
    if (worker == d.by_type.end()) continue;
    int queued = 0;
    {
      MutexLock lock(mu_);
      auto count = [this, &type](const std::string& t) REQUIRES(mu_) {
        auto it = queued_for_.find({t, type});
        return it == queued_for_.end() ? 0 : it->second;
      };
      queued =
          count(d.device.name) + (d.device.is_gpu ? count(std::string(scheduler::kAnyGpu)) : 0);
    }
    worker->second->expect_jobs(queued);
  }
}

StatusOr<model::JobRequest> JobServiceImpl::parse_stored_request(
    const model::JobRecord& record) const {
  model::RequestLimits limits;
  limits.min_timeout_s = 0;  // a stored request was valid when it was accepted
  limits.max_timeout_s = 1e9;
  limits.max_trials = 1 << 30;
  KF_ASSIGN_OR_RETURN(auto request, record.kind == model::JobKind::kCompare
                                        ? model::parse_compare_request(record.request, limits)
                                        : model::parse_evaluate_request(record.request, limits));
  KF_ASSIGN_OR_RETURN(request.batch, model::parse_batch_membership(record.request));
  return request;
}

Status JobServiceImpl::start() {
  reuse_.clear();
  if (shared_ != nullptr) {
    // Unfinished jobs belong to the queue, or to live nodes: a dead node's come back when its
    // leases expire (coordinator_loop). Those still recorded under this node's name were
    // interrupted by this process's restart.
    KF_ASSIGN_OR_RETURN(int64_t own, shared_->recover_own(options_.max_attempts, clock_.unix_ms()));
    if (own > 0) KF_LOG_INFO("recovered {} job(s) this node ran before it restarted", own);
    recovered_ += own;
    scheduler_->start();
    coordinator_ = std::thread([this] { coordinator_loop(); });
    KF_LOG_INFO("node {} shares the store's queue", shared_->node_id());
    return Status::ok();
  }
  KF_ASSIGN_OR_RETURN(auto unfinished, store_->unfinished_jobs());
  for (auto& record : unfinished) {
    if (record.process_bound) {
      // Whoever waited for it was in the process that submitted it, which has ended: run
      // again, it would hold a device for no one, ahead of the new process's own work.
      const std::string why =
          "not run again: the kforge mcp process that submitted it ended before it finished, "
          "and no one else can receive its result";
      KF_LOG_INFO("job={} {}", record.id, why);
      (void)store_->finish_job(record.id, model::JobState::kCancelled, Json(), why,
                               clock_.unix_ms());
      continue;
    }
    auto request = parse_stored_request(record);
    if (!request.is_ok()) {
      (void)store_->finish_job(
          record.id, model::JobState::kFailed, Json(),
          "stored request can no longer be read: " + request.status().to_string(),
          clock_.unix_ms());
      continue;
    }
    if (record.attempts >= options_.max_attempts) {
      std::string why = "interrupted " + std::to_string(record.attempts) +
                        " times by server restarts; not retried";
      KF_LOG_WARN("job={} {}", record.id, why);
      (void)store_->finish_job(record.id, model::JobState::kFailed, Json(), why, clock_.unix_ms());
      continue;
    }
    if (record.state == model::JobState::kRunning) KF_RETURN_IF_ERROR(store_->requeue(record.id));
    auto target = scheduler_->resolve_target(request->device);
    if (!target.is_ok()) {
      (void)store_->finish_job(record.id, model::JobState::kFailed, Json(),
                               "device no longer available: " + target.status().message(),
                               clock_.unix_ms());
      continue;
    }
    Active active;
    record.state = model::JobState::kQueued;
    active.request_bytes = record.request.dump().size();
    active.client = "recovered";  // accepted before the restart: counted, never refused
    active.kernel_type = std::string(model::to_string(request->kernel.kernel_type));
    record.request = Json();
    active.record = record;
    active.target = *target;
    const bool python = !uses_only_cuda(*request);
    {
      MutexLock lock(mu_);
      quota_.add(active.client, active.request_bytes);
      count_queued_locked(active, python);
      active_[record.id] = std::move(active);
    }
    scheduler_->enqueue(record.id, *target);
    tell_queued(*target, python ? "python" : "cuda");
    ++recovered_;
    legacy_.job_submitted(clock_.unix_ms());
    KF_LOG_INFO("job={} recovered after restart (attempt {} of {})", record.id, record.attempts + 1,
                options_.max_attempts);
  }
  scheduler_->start();
  return Status::ok();
}

void JobServiceImpl::stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, a] : active_) {
      if (a.cancel) {
        a.cancel_reason = "server shutting down";
        a.cancelled_by_shutdown = true;
        a.cancel->cancel();
      }
    }
  }
  if (coordinator_.joinable()) coordinator_.join();
  scheduler_->stop();
  if (shared_ != nullptr) {
    // Claimed jobs that never started go back to the shared queue at once.
    std::vector<std::string> unstarted;
    {
      MutexLock lock(mu_);
      for (const auto& [id, a] : active_) {
        if (a.claimed && !a.cancel) unstarted.push_back(id);
      }
    }
    for (const auto& id : unstarted) {
      if (Status s = store_->requeue(id); !s) KF_LOG_WARN("job={} requeue: {}", id, s.message());
    }
  }
  for (auto& d : devices_) {
    for (auto& [type, w] : d.by_type)
      w->shutdown();
  }
}

void JobServiceImpl::prepare_device(const std::string& device) {
  for (auto& d : devices_) {
    if (d.device.name != device) continue;
    // Before the workers start: nothing else runs on the GPU while its peaks are measured.
    if (d.measure_peaks) {
      auto peaks = d.measure_peaks();
      if (!peaks.is_ok()) KF_LOG_WARN("device={} peaks: {}", device, peaks.status().message());
      MutexLock lock(mu_);
      peaks_[device] = peaks.is_ok() ? *peaks : Json{{"error", peaks.status().message()}};
    }
    for (auto& [type, w] : d.by_type)
      w->prepare();
  }
}

Json JobServiceImpl::peaks_of(const std::string& device) {
  MutexLock lock(mu_);
  auto it = peaks_.find(device);
  return it != peaks_.end() ? it->second : Json();
}

void JobServiceImpl::add_extras(Json& result, const model::JobRequest& request,
                                const std::string& device) {
  ResultExtrasContext c;
  c.request = &request;
  c.on_gpu = device != "cpu";
  const Json peaks = c.on_gpu ? peaks_of(device) : Json();
  if (peaks.is_object() && !peaks.contains("error")) {
    c.peaks = peaks;
  } else {
    c.peaks_error = peaks.is_object() ? peaks.value("error", "") : "not measured yet";
  }
  c.device_metrics = wants_device_metrics(request);
  if (c.device_metrics && c.on_gpu) {
    c.device_metrics_unavailable = options_.device_metrics_unavailable;
  }
  add_result_extras(result, c);
}

workers::Worker* JobServiceImpl::pick_worker(const std::string& device,
                                             const model::JobRequest& request) {
  for (auto& d : devices_) {
    if (d.device.name != device) continue;
    if (uses_only_cuda(request)) {
      if (auto it = d.by_type.find("cuda"); it != d.by_type.end()) return it->second.get();
    }
    if (auto it = d.by_type.find("python"); it != d.by_type.end()) return it->second.get();
  }
  return nullptr;
}

StatusOr<model::JobRecord> JobServiceImpl::submit(model::JobRequest request, const Caller& caller) {
  const std::string& client = caller.client;
  KF_ASSIGN_OR_RETURN(std::string target, scheduler_->resolve_target(request.device));
  if (!request.seed) request.seed = secure_random_u64() >> 1;  // fits a JSON int64
  model::JobRecord record;
  record.id = new_job_id();
  record.kind = request.kind;
  record.state = model::JobState::kQueued;
  record.request = model::to_request_json(request);
  record.device = target;
  record.created_ms = clock_.unix_ms();
  record.submitter = caller.principal.name;
  // In a shared queue the submitting process may outlive a restart of this one.
  record.process_bound = caller.process_bound && shared_ == nullptr;
  const size_t request_bytes = record.request.dump().size();
  {
    // Counted before the insert, so concurrent submits cannot overshoot the limits.
    MutexLock lock(mu_);
    if (stopping_) return unavailable("the server is shutting down");
    KF_RETURN_IF_ERROR(quota_.admit(client, request_bytes));
    if (shared_ != nullptr) {
      // Any node may run it (coordinator_loop); this one counts it until it finishes, which
      // may be before insert_job returns.
      Watched& w = watched_[record.id];
      w.client = client;
      w.request_bytes = request_bytes;
    }
  }
  if (Status s = store_->insert_job(record); !s) {
    MutexLock lock(mu_);
    quota_.release(client, request_bytes);
    watched_.erase(record.id);
    return s;
  }
  if (shared_ != nullptr) {
    ++submitted_;
    legacy_.job_submitted(record.created_ms);
    return record;
  }
  {
    MutexLock lock(mu_);
    Active active;
    Json request_json = std::move(record.request);  // not copied into active_
    active.record = record;
    record.request = std::move(request_json);
    active.client = client;
    active.request_bytes = request_bytes;
    active.target = target;
    active.kernel_type = std::string(model::to_string(request.kernel.kernel_type));
    count_queued_locked(active, !uses_only_cuda(request));
    active_[record.id] = std::move(active);
  }
  scheduler_->enqueue(record.id, target);
  tell_queued(target, uses_only_cuda(request) ? "cuda" : "python");
  publish_change({record.id, record.submitter, model::JobState::kQueued, ""});
  ++submitted_;
  legacy_.job_submitted(record.created_ms);
  KF_LOG_DEBUG("job={} accepted kind={} target={}", record.id, model::to_string(record.kind),
               target);
  return record;
}

Json JobServiceImpl::worker_spec(const model::JobRecord& record, const model::JobRequest& r,
                                 const std::string& device) const {
  // The canonical spec (model/job_spec.h): every default resolved; scratch_dir and
  // cache_dir are the worker's to fill in.
  model::JobSpec spec;
  spec.job_id = record.id;
  spec.request = r;
  spec.device = device;
  if (wants_device_metrics(r) && device != "cpu" && options_.device_metrics_unavailable.empty()) {
    spec.device_metrics = {
        {"ncu", options_.ncu}, {"sections", ncu_sections()}, {"timeout_s", r.timeout_s}};
  }
  // The native worker runs a cuda-only compare in one process: nothing to reuse there.
  if (!uses_only_cuda(r)) spec.reference_reuse = reuse_.spec_for(r, device);
  return model::to_json(spec);
}

void JobServiceImpl::run_job(const std::string& job_id, const std::string& device) {
  model::JobRecord record;
  bool claimed = false;
  auto cancel = std::make_shared<workers::CancelToken>();
  std::string cancelled_before_start;
  std::string started_as;  // the worker type it was queued for
  std::string target;
  {
    MutexLock lock(mu_);
    auto it = active_.find(job_id);
    if (it == active_.end()) return;  // cancelled while queued
    target = it->second.target;
    if (it->second.cancel && it->second.cancel->cancelled()) {
      cancelled_before_start = it->second.cancel_reason;
    }
    it->second.cancel = cancel;
    it->second.record.state = model::JobState::kRunning;
    it->second.record.device = device;
    started_as = it->second.queued_as;
    uncount_queued_locked(it->second);
    if (!it->second.claimed) {  // a claim already recorded the start in the store
      it->second.record.started_ms = clock_.unix_ms();
      ++it->second.record.attempts;
    }
    record = it->second.record;
    claimed = it->second.claimed;
  }
  if (!started_as.empty()) tell_queued(target, started_as);  // one fewer waits
  if (!cancelled_before_start.empty()) {
    finish(job_id, model::JobState::kCancelled, Json(), cancelled_before_start);
    return;
  }
  if (Status s = claimed ? Status::ok() : store_->mark_running(job_id, device, record.started_ms);
      !s) {
    KF_LOG_ERROR("job={} cannot be marked running: {}", job_id, s.message());
    finish(job_id, model::JobState::kFailed, Json(), "store error: " + s.message());
    return;
  }
  legacy_.job_started(device, static_cast<double>(record.started_ms - record.created_ms) / 1000.0);
  publish_progress(job_id, {job_id, "starting", "running on " + device, 0.01});
  auto loaded = load_request(job_id);
  if (!loaded.is_ok()) {
    KF_LOG_ERROR("job={} request cannot be read back: {}", job_id, loaded.status().to_string());
    finish(job_id, model::JobState::kFailed, Json(),
           "stored request can no longer be read: " + loaded.status().to_string());
    return;
  }
  const model::JobRequest request = std::move(loaded).value();
  workers::Worker* worker = pick_worker(device, request);
  if (worker == nullptr) {
    finish(job_id, model::JobState::kFailed, Json(), "no worker can run this job on " + device);
    return;
  }
  KF_LOG_INFO("job={} device={} worker={} started", job_id, device, worker->type());
  workers::WorkerJob job;
  job.job_id = job_id;
  job.submitter = record.submitter;
  job.spec = worker_spec(record, request, device);
  job.timeout = std::chrono::milliseconds(static_cast<int64_t>(request.timeout_s * 1000.0));
  job.reference_follows = !request.batch || request.batch->index + 1 < request.batch->size;
  auto started = clock_.now();
  workers::WorkerOutcome outcome;
  try {
    outcome = worker->run(
        job, *cancel, [this, &job_id](const std::string& phase, const std::string& msg, double f) {
          publish_progress(job_id, {job_id, phase, msg, f});
        });
  } catch (const std::exception& e) {
    // A worker must not throw (what a child sends is untrusted), but if one does, the job
    // still ends, and its slot and quota are given back, instead of staying "running".
    outcome = {workers::WorkerOutcome::Kind::kWorkerFailure, Json(),
               std::string("the worker failed unexpectedly: ") + e.what()};
  }
  double ms = std::chrono::duration<double, std::milli>(clock_.now() - started).count();
  reuse_.job_ended(request, device, outcome.result);
  switch (outcome.kind) {
    case workers::WorkerOutcome::Kind::kResult:
      KF_LOG_INFO("job={} device={} finished in {:.0f} ms compiled={} correct={}", job_id, device,
                  ms, outcome.result.value("compiled", false),
                  outcome.result.value("correctness", false));
      add_extras(outcome.result, request, device);
      finish(job_id, model::JobState::kSucceeded, std::move(outcome.result), {});
      break;
    case workers::WorkerOutcome::Kind::kCancelled: {
      std::string reason;
      bool shutdown = false;
      {
        MutexLock lock(mu_);
        auto it = active_.find(job_id);
        if (it != active_.end()) {
          reason = it->second.cancel_reason;
          shutdown = it->second.cancelled_by_shutdown;
        }
      }
      if (shutdown) {
        // Not the client's doing: leave it queued in the store for the next start.
        MutexLock lock(mu_);
        if (auto it = active_.find(job_id); it != active_.end()) forget_locked(it);
        (void)store_->requeue(job_id);
        return;
      }
      finish(job_id, model::JobState::kCancelled, std::move(outcome.result),
             reason.empty() ? "cancelled" : reason);
      break;
    }
    case workers::WorkerOutcome::Kind::kWorkerFailure:
      KF_LOG_ERROR("job={} device={} worker failure: {}", job_id, device, outcome.error);
      finish(job_id, model::JobState::kFailed, Json(), outcome.error);
      break;
  }
  // The answer is out; what the worker does next (warming a replacement process) is
  // no longer on this job's clock.
  worker->after_job(job);
}

void JobServiceImpl::finish(const std::string& id, model::JobState state, Json result,
                            std::string error) {
  int64_t now = clock_.unix_ms();
  FinishedJobSample sample;
  std::string kernel_type = "unknown";
  {
    MutexLock lock(mu_);
    auto it = active_.find(id);
    if (it != active_.end()) {
      const Active& a = it->second;
      const int64_t loaded = a.checking_ms > 0 ? a.checking_ms
                             : a.timing_ms > 0 ? a.timing_ms
                                               : now;
      if (a.loading_ms > 0) sample.compile_s = static_cast<double>(loaded - a.loading_ms) / 1000.0;
      if (a.timing_ms > 0) sample.timing_s = static_cast<double>(now - a.timing_ms) / 1000.0;
      sample.started = a.record.started_ms > 0;
      sample.run_s = sample.started ? static_cast<double>(now - a.record.started_ms) / 1000.0 : 0;
      sample.end_to_end_s = static_cast<double>(now - a.record.created_ms) / 1000.0;
      sample.device = a.record.device;
      kernel_type = a.kernel_type;
    }
  }
  // The old server reported how long compilation took; the loading phase is kforge's.
  if (result.is_object() && !result.contains("compilation_time") && sample.compile_s >= 0) {
    result["compilation_time"] = sample.compile_s;
  }
  // A job's texts are its code's to choose: bounded before anyone stores or reads them.
  if (cap_result(result, options_.result_limits)) {
    KF_LOG_WARN("job={} result cut to the result limits (result_caps.h)", id);
  }
  if (error.size() > options_.result_limits.max_text_bytes) {
    error = cap_text(error, options_.result_limits.max_text_bytes);
  }
  Status stored = store_->finish_job(id, state, result, error, now);
  if (shared_ != nullptr) {
    // The shared database may be restarting: try again for a while. A result never recorded
    // leaves the job to its lease, which this node stops renewing: it runs again elsewhere.
    for (int retry = 1; retry <= 5 && stored.code() == ErrorCode::kUnavailable; ++retry) {
      KF_LOG_WARN("job={} result not stored yet ({}); retrying", id, stored.message());
      std::this_thread::sleep_for(std::chrono::seconds(retry));
      stored = store_->finish_job(id, state, result, error, now);
    }
  }
  if (!stored) KF_LOG_ERROR("job={} result could not be stored: {}", id, stored.message());
  sample.state = state;
  sample.result = &result;
  legacy_.job_finished(sample);
  job_metrics_.job_finished(kernel_type, state, result, sample.started ? sample.run_s : -1.0);
  // The device counts the job (jobs_run, busy time) before anyone hears that it ended.
  scheduler_->job_ended(id);
  std::map<uint64_t, DoneCallback> subs;
  model::JobRecord record;
  {
    MutexLock lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end()) return;
    record = std::move(it->second.record);
    subs = std::move(it->second.done_subs);
    if (it->second.claimed && !stored) {
      // Shared queue: the store did not take this result (the lease went to another node):
      // the waiters get the result the store keeps, when it comes.
      for (auto& [sub, cb] : subs)
        watched_[id].done_subs[sub] = std::move(cb);
      subs.clear();
    }
    for (const auto& [sub, _] : subs)
      subscription_.erase(sub);
    for (const auto& [sub, _] : it->second.progress_subs)
      subscription_.erase(sub);
    forget_locked(it);
  }
  record.state = state;
  record.result = std::move(result);
  record.error = std::move(error);
  record.finished_ms = now;
  record.phase.clear();
  ++finished_;
  // The change feed first: whoever a done callback wakes finds the end already announced
  // (a listener that unsubscribes once the job is done still sees it end).
  publish_change({id, record.submitter, state, ""});
  for (auto& [sub, cb] : subs)
    cb(record);
}

bool JobServiceImpl::cancel_if_local(const std::string& id, const std::string& reason) {
  {
    MutexLock lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end()) return false;
    if (it->second.cancel) {
      it->second.cancel_reason = reason;
      it->second.cancel->cancel();
      return true;
    }
    if (!scheduler_->remove(id)) {
      // Between dequeue and start: the runner will see the token.
      it->second.cancel_reason = reason;
      it->second.cancel = std::make_shared<workers::CancelToken>();
      it->second.cancel->cancel();
      return true;
    }
  }
  finish(id, model::JobState::kCancelled, Json(), reason);
  return true;
}

Status JobServiceImpl::cancel(const std::string& id, const std::string& reason) {
  const std::string why = reason.empty() ? "cancelled by client" : reason;
  if (cancel_if_local(id, why)) return Status::ok();
  if (shared_ != nullptr) {
    // Queued: cancelled now; running on another node: that node cancels it (its events or
    // next heartbeat), and when_done answers when it has.
    return shared_->request_cancel(id, why, clock_.unix_ms()).status();
  }
  // Finished or unknown.
  KF_ASSIGN_OR_RETURN(auto stored, store_->get_job(id));
  if (!stored) return unknown_job(id);
  return Status::ok();
}

StatusOr<int64_t> JobServiceImpl::cleanup(std::chrono::seconds older_than) {
  int64_t cutoff = clock_.unix_ms() - older_than.count() * 1000;
  return store_->delete_finished_before(cutoff);
}

}  // namespace kforge::jobs
