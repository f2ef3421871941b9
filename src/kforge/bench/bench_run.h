// BenchRun: runs a BenchPlan's jobs through a JobService (an embedded engine or a remote
// `kforge serve`), a couple in flight at a time so the device never waits for a submit, and
// builds the report (bench_report.h) when the last one ends. Nothing waits on a thread:
// submits (which block) run on the executor, results arrive as JobService callbacks.
//
// Lifetime: the run keeps itself alive until `done` has been called; `service` and the
// executor's threads must outlive it. A job the service could not run (failed, cancelled,
// timed out) is a result of the bench, not an error of it; `done` gets an error only when a
// submit is refused (a bad device, a server going away) or the run is cancelled.
//
// Thread-safety: cancel() may be called from any thread; callbacks run without locks held,
// `progress` strictly in order, `done` exactly once and last.
//
// Every job is submitted as `caller` (JobService::submit: the per-client queue quota's key
// and the principal recorded as the jobs' submitter), whoever asked for the bench.
//
// start_jobs() is the same run ending with the jobs' outcomes instead of a report, for a
// caller that goes on with them (the regeneration loop, regenerate.h).
//
// Example:
//   auto run = BenchRun::start(service, executor, std::move(plan), "kforge bench",
//       [](const BenchProgress& p) { draw(p.done, p.total, p.message); },
//       [&](StatusOr<Json> report) { promise.set_value(std::move(report)); });
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kforge/bench/bench_plan.h"
#include "kforge/bench/bench_report.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/jobs/job_service.h"

namespace kforge::bench {

using Executor = std::function<void(std::function<void()>)>;

struct BenchProgress {
  int done = 0;   // jobs finished
  int total = 0;  // jobs planned
  std::string message;
};

// Resuming a run whose first jobs were submitted before (a durable MCP task after a server
// restart, frontends/mcp/task_book.h): `job_ids[i]`, when not empty, is the job of plan step i
// submitted earlier; the run waits for it instead of submitting it again (one the service no
// longer knows is submitted anew). `on_submitted` (when set) is told each job id as it is
// submitted, on the executor, so that it can be remembered.
struct BenchResume {
  std::vector<std::string> job_ids;
  std::function<void(size_t index, const std::string& job_id)> on_submitted;
};

class BenchRun : public std::enable_shared_from_this<BenchRun> {
 public:
  using ProgressFn = std::function<void(const BenchProgress&)>;
  using DoneFn = std::function<void(StatusOr<Json> report)>;
  // The outcomes, parallel to plan.jobs (start_jobs).
  using OutcomesFn = std::function<void(StatusOr<std::vector<JobOutcome>> outcomes)>;

  static std::shared_ptr<BenchRun> start(jobs::JobService& service, Executor executor,
                                         BenchPlan plan, jobs::Caller caller, ProgressFn progress,
                                         DoneFn done, BenchResume resume = {});
  static std::shared_ptr<BenchRun> start_jobs(jobs::JobService& service, Executor executor,
                                              BenchPlan plan, jobs::Caller caller,
                                              ProgressFn progress, OutcomesFn done);

  // Cancels the jobs in flight and ends the run with kCancelled (once they have ended).
  void cancel(const std::string& reason);

  BenchRun(jobs::JobService& service, Executor executor, BenchPlan plan, jobs::Caller caller,
           ProgressFn progress, DoneFn done, BenchResume resume = {},
           OutcomesFn outcomes_done = nullptr);

 private:
  static constexpr int kInFlight = 2;

  void pump();                  // on the executor: submits jobs until kInFlight are in flight
  Status submit(size_t index);  // one job, and its when_done subscription
  void on_finished(size_t index, const model::JobRecord& job);
  void fail(Status why);
  // Reports the run (once) when nothing is in flight and nothing is left to submit.
  void finish_if_idle() EXCLUDES(mu_);

  jobs::JobService& service_;
  const Executor executor_;
  const BenchPlan plan_;
  const jobs::Caller caller_;
  const ProgressFn progress_;
  const DoneFn done_;               // the report, or
  const OutcomesFn outcomes_done_;  // the outcomes (start_jobs)
  const BenchResume resume_;
  const int64_t started_ms_;

  Mutex mu_;
  std::vector<JobOutcome> outcomes_ GUARDED_BY(mu_);
  size_t next_ GUARDED_BY(mu_) = 0;
  int in_flight_ GUARDED_BY(mu_) = 0;
  int finished_ GUARDED_BY(mu_) = 0;
  bool ended_ GUARDED_BY(mu_) = false;  // done_ called or about to be
  bool pumping_ GUARDED_BY(mu_) = false;
  Status stop_reason_ GUARDED_BY(mu_);  // cancel or failed submit
  Mutex progress_mu_;                   // serialises progress_ calls
};

}  // namespace kforge::bench
