// FakeJobService: a real in-memory JobService for frontend tests. Jobs live in a map; they
// stay queued until the test moves them (start / finish / fail / cancel). Subscriptions are
// real: when_done callbacks run when the test finishes a job, unsubscribe removes them, and
// tests can wait for subscribers to appear or go away.
//
// It also records the thread of every call that the interface marks "blocks", so a test
// can check that a frontend never makes them on its io thread.
//
// Thread-safety: every method is thread-safe; callbacks run without the lock held.
//
// Example:
//   FakeJobService jobs;
//   ... POST /evaluate ...
//   ASSERT_TRUE(jobs.wait_for_waiters(1, 5s));
//   jobs.finish(jobs.job_ids().front(), Json{{"compiled", true}});
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kforge/jobs/job_service.h"

namespace kforge::testing {

class FakeJobService : public jobs::JobService {
 public:
  FakeJobService() = default;

  // ---- JobService ----
  StatusOr<model::JobRecord> submit(model::JobRequest request, const jobs::Caller& caller) override;
  StatusOr<model::JobRecord> get(const std::string& id) override;
  StatusOr<uint64_t> when_done(const std::string& id, DoneCallback done) override;
  StatusOr<uint64_t> on_progress(const std::string& id, ProgressCallback progress) override;
  void unsubscribe(uint64_t subscription) override;
  Status cancel(const std::string& id, const std::string& reason) override;
  Json stats() override;
  Json health() override;
  StatusOr<int64_t> cleanup(std::chrono::seconds older_than) override;

  // ---- test controls ----
  // Makes the next submits fail with `status` (OK restores normal behaviour).
  void set_submit_error(Status status);
  // queued -> running; progress subscribers get a "starting" event.
  Status start(const std::string& id);
  // -> success with `result` as kernel_exec_result; done subscribers are called.
  Status finish(const std::string& id, Json result);
  // -> failed with `error`.
  Status fail(const std::string& id, std::string error);
  // Sends a progress event to the job's progress subscribers.
  Status report_progress(const std::string& id, std::string phase, double fraction);
  // Moves a finished job's finish time into the past (for cleanup tests).
  Status age_finished_job(const std::string& id, std::chrono::seconds age);

  // Ids of submitted jobs, oldest first.
  std::vector<std::string> job_ids() const;
  // The request as submitted (model::JobRequest keeps what the frontend parsed).
  std::optional<model::JobRequest> submitted_request(const std::string& id) const;
  // Who submitted it (the `client` argument of submit).
  std::optional<std::string> submitted_client(const std::string& id) const;
  // Live when_done subscriptions (all jobs).
  size_t waiter_count() const;
  // Waits until waiter_count() == n (true) or the timeout passes (false).
  bool wait_for_waiters(size_t n, std::chrono::milliseconds timeout) const;
  // Waits until at least n jobs were submitted.
  bool wait_for_jobs(size_t n, std::chrono::milliseconds timeout) const;
  // Threads on which methods that "block" were called.
  std::set<std::thread::id> blocking_call_threads() const;
  int health_calls() const;
  // What health() says in "status" ("healthy" or "degraded", as the real service).
  void set_health_status(std::string status);

 private:
  struct Job {
    model::JobRecord record;
    model::JobRequest request;
    std::string client;
  };
  struct Waiter {
    std::string job_id;
    DoneCallback done;
  };
  struct ProgressWatcher {
    std::string job_id;
    ProgressCallback progress;
  };

  void note_blocking_call();  // requires mu_
  // Moves a job to a terminal state and returns the callbacks to run (outside the lock).
  StatusOr<std::vector<DoneCallback>> terminate(const std::string& id, model::JobState state,
                                                Json result, std::string error);
  static int64_t now_ms();

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::map<std::string, Job> jobs_;               // guarded by mu_
  std::vector<std::string> order_;                // guarded by mu_
  std::map<uint64_t, Waiter> waiters_;            // guarded by mu_
  std::map<uint64_t, ProgressWatcher> watchers_;  // guarded by mu_
  uint64_t next_id_ = 1;                          // guarded by mu_
  Status submit_error_;                           // guarded by mu_
  std::set<std::thread::id> blocking_threads_;    // guarded by mu_
  int health_calls_ = 0;                          // guarded by mu_
  std::string health_status_ = "healthy";         // guarded by mu_
};

}  // namespace kforge::testing
