#include "fakes/fake_worker.h"

#include <poll.h>

#include <chrono>

namespace kforge::testing {

void FakeWorker::prepare() {
  std::lock_guard lock(mu_);
  ++prepared_;
}

workers::WorkerOutcome FakeWorker::run(const workers::WorkerJob& job, workers::CancelToken& cancel,
                                       const workers::ProgressSink& progress) {
  uint64_t generation = 0;
  bool fail = false;
  {
    std::lock_guard lock(mu_);
    started_.push_back(job.job_id);
    generation = release_generation_;
    fail = fail_next;
    fail_next = false;
  }
  cv_.notify_all();
  if (progress) progress("correctness", "checking", 0.3);
  if (fail) return {workers::WorkerOutcome::Kind::kWorkerFailure, Json(), "fake worker failure"};
  auto deadline = std::chrono::steady_clock::now() + job.timeout;
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (!held_ || release_generation_ != generation) break;
    }
    if (cancel.cancelled()) {
      return {workers::WorkerOutcome::Kind::kCancelled, Json{{"compiled", true}}, "cancelled"};
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return {workers::WorkerOutcome::Kind::kResult,
              Json{{"compiled", true}, {"correctness", false}, {"error_kind", "timeout"}},
              {}};
    }
    pollfd p{cancel.wait_fd(), POLLIN, 0};
    ::poll(&p, 1, 5);
  }
  if (progress) progress("timing_candidate", "timing", 0.8);
  // phases_ms as the real workers report them (GET /metrics turns them into histograms).
  Json result = {{"compiled", true},
                 {"correctness", true},
                 {"runtime", 1.5},
                 {"phases_ms", {{"import", 40.0}, {"timing", 1500.0}}},
                 {"echo", job.spec}};
  return {workers::WorkerOutcome::Kind::kResult, std::move(result), {}};
}

Json FakeWorker::status() const {
  std::lock_guard lock(mu_);
  return Json{{"type", "python"},
              {"state", worker_state_name(state())},
              {"restarts", 0},
              {"jobs_run", started_.size()},
              {"prepared", prepared_}};
}

void FakeWorker::hold(bool held) {
  std::lock_guard lock(mu_);
  held_ = held;
}

void FakeWorker::release_all() {
  {
    std::lock_guard lock(mu_);
    ++release_generation_;
  }
  cv_.notify_all();
}

bool FakeWorker::wait_started(size_t n) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return started_.size() >= n; });
}

std::vector<std::string> FakeWorker::started_jobs() const {
  std::lock_guard lock(mu_);
  return started_;
}

void FakeWorker::expect_jobs(int queued) {
  std::lock_guard lock(mu_);
  announced_.push_back(queued);
}

std::vector<int> FakeWorker::announced() const {
  std::lock_guard lock(mu_);
  return announced_;
}

}  // namespace kforge::testing
