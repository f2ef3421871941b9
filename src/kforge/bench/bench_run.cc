#include "kforge/bench/bench_run.h"

#include <chrono>

#include "kforge/common/log.h"
#include "kforge/common/thread_annotations.h"

namespace kforge::bench {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

BenchRun::BenchRun(jobs::JobService& service, Executor executor, BenchPlan plan,
                   jobs::Caller caller, ProgressFn progress, DoneFn done, BenchResume resume,
                   OutcomesFn outcomes_done)
    : service_(service),
      executor_(std::move(executor)),
      plan_(std::move(plan)),
      caller_(std::move(caller)),
      progress_(std::move(progress)),
      done_(std::move(done)),
      outcomes_done_(std::move(outcomes_done)),
      resume_(std::move(resume)),
      started_ms_(now_ms()),
      outcomes_(plan_.jobs.size()) {}

std::shared_ptr<BenchRun> BenchRun::start(jobs::JobService& service, Executor executor,
                                          BenchPlan plan, jobs::Caller caller, ProgressFn progress,
                                          DoneFn done, BenchResume resume) {
  auto run =
      std::make_shared<BenchRun>(service, std::move(executor), std::move(plan), std::move(caller),
                                 std::move(progress), std::move(done), std::move(resume));
  run->executor_([run] { run->pump(); });
  return run;
}

std::shared_ptr<BenchRun> BenchRun::start_jobs(jobs::JobService& service, Executor executor,
                                               BenchPlan plan, jobs::Caller caller,
                                               ProgressFn progress, OutcomesFn done) {
  auto run =
      std::make_shared<BenchRun>(service, std::move(executor), std::move(plan), std::move(caller),
                                 std::move(progress), nullptr, BenchResume{}, std::move(done));
  run->executor_([run] { run->pump(); });
  return run;
}

void BenchRun::pump() {
  MutexLock lock(mu_);
  // One pump at a time, so jobs are submitted in plan order; the active one sees slots that
  // free up meanwhile, because the loop condition is checked under the lock.
  if (pumping_) return;
  pumping_ = true;
  while (!ended_ && stop_reason_.is_ok() && in_flight_ < kInFlight && next_ < plan_.jobs.size()) {
    const size_t index = next_++;
    ++in_flight_;
    lock.unlock();
    Status failed = submit(index);
    lock.lock();
    if (!failed.is_ok()) {
      pumping_ = false;
      lock.unlock();
      fail(std::move(failed));
      return;
    }
  }
  pumping_ = false;
  lock.unlock();
  finish_if_idle();
}

Status BenchRun::submit(size_t index) {
  const PlannedJob& planned = plan_.jobs[index];
  std::string job_id = index < resume_.job_ids.size() ? resume_.job_ids[index] : std::string();
  if (job_id.empty() || !service_.get(job_id).is_ok()) {
    auto job = service_.submit(planned.request, caller_);
    if (!job.is_ok()) {
      MutexLock lock(mu_);
      --in_flight_;
      return job.status().with_context("kforge bench: submitting " + planned.label);
    }
    job_id = job->id;
    if (resume_.on_submitted) resume_.on_submitted(index, job_id);
  }
  std::string stop_message;
  {
    MutexLock lock(mu_);
    outcomes_[index].submitted = true;
    outcomes_[index].job_id = job_id;
    if (!stop_reason_.is_ok()) stop_message = stop_reason_.message();
  }
  if (!stop_message.empty()) {  // cancelled while this one was being submitted
    service_.cancel(job_id, "kforge bench stopped: " + stop_message).ignore();
  }
  auto self = shared_from_this();
  auto sub = service_.when_done(
      job_id, [self, index](const model::JobRecord& record) { self->on_finished(index, record); });
  if (!sub.is_ok()) {  // no callback will come for it: it is no longer in flight here
    MutexLock lock(mu_);
    --in_flight_;
    outcomes_[index].state = "failed";
    outcomes_[index].error = sub.status().to_string();
    return sub.status().with_context("kforge bench: waiting for job " + job_id);
  }
  return Status::ok();
}

void BenchRun::on_finished(size_t index, const model::JobRecord& record) {
  MutexLock lock(mu_);
  JobOutcome& o = outcomes_[index];
  if (!o.state.empty()) return;  // already recorded
  o.state = std::string(model::to_string(record.state));
  o.result = record.result;
  o.error = record.error;
  --in_flight_;
  const BenchProgress progress{++finished_, static_cast<int>(plan_.jobs.size()),
                               plan_.jobs[index].label + ": " + describe_outcome(o)};
  lock.unlock();
  if (progress_) {
    MutexLock plock(progress_mu_);
    progress_(progress);
  }
  lock.lock();
  if (stop_reason_.is_ok() && next_ < plan_.jobs.size()) {
    lock.unlock();
    auto self = shared_from_this();
    executor_([self] { self->pump(); });
    return;
  }
  lock.unlock();
  finish_if_idle();
}

void BenchRun::fail(Status why) {
  std::vector<std::string> running;
  std::string stop_message;
  {
    MutexLock lock(mu_);
    if (stop_reason_.is_ok()) stop_reason_ = std::move(why);
    stop_message = stop_reason_.message();
    for (const auto& o : outcomes_) {
      if (o.submitted && o.state.empty()) running.push_back(o.job_id);
    }
  }
  for (const auto& id : running) {
    Status s = service_.cancel(id, "kforge bench stopped: " + stop_message);
    if (!s.is_ok()) KF_LOG_WARN("kforge bench: cancelling job {}: {}", id, s.to_string());
  }
  finish_if_idle();
}

void BenchRun::cancel(const std::string& reason) {
  {
    MutexLock lock(mu_);
    if (ended_ || !stop_reason_.is_ok()) return;
  }
  auto self = shared_from_this();
  executor_([self, reason] { self->fail(Status(ErrorCode::kCancelled, reason)); });
}

void BenchRun::finish_if_idle() {
  MutexLock lock(mu_);
  const bool all_submitted = next_ >= plan_.jobs.size();
  if (ended_ || in_flight_ > 0 || (stop_reason_.is_ok() && !all_submitted)) return;
  ended_ = true;
  const Status stop = stop_reason_;
  std::vector<JobOutcome> outcomes = outcomes_;
  lock.unlock();
  if (outcomes_done_) {
    if (stop.is_ok()) {
      outcomes_done_(std::move(outcomes));
    } else {
      outcomes_done_(stop);
    }
    return;
  }
  if (!stop.is_ok()) {
    done_(stop);
    return;
  }
  done_(build_report(plan_, outcomes, started_ms_, now_ms()));
}

}  // namespace kforge::bench
