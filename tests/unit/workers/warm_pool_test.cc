// WarmPool and WorkerBook with a fake process launcher: what is started, handed out,
// retired and counted. (The real processes are covered by the integration tests.)
#include "kforge/workers/warm_pool.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kforge/workers/worker_book.h"

namespace kforge::workers {
namespace {

struct FakeChild {
  int id = 0;
  ChildChannel channel;
  int waits = 0;
};

// Launches FakeChild processes; each is ready unless the script says it dies first, and a
// start fails while `start_failures` is positive.
class FakeLauncher {
 public:
  std::deque<bool> ready_script;  // per started process, in order: ready? (default true)
  int start_failures = 0;
  int started = 0;
  std::vector<int> waited;           // ids, in order of wait_ready
  std::vector<int> started_at_wait;  // how many had been started at each wait_ready

  WarmPool<FakeChild>::Hooks hooks() {
    WarmPool<FakeChild>::Hooks h;
    h.start = [this]() -> StatusOr<std::unique_ptr<FakeChild>> {
      if (start_failures > 0) {
        --start_failures;
        return unavailable("fork failed (fake)");
      }
      auto c = std::make_unique<FakeChild>();
      c->id = ++started;
      c->channel.ready_message = Json{{"warmup_ms", 10.0 * c->id}, {"device", "cpu"}};
      ready_.push_back(ready_script.empty() || ready_script.front());
      if (!ready_script.empty()) ready_script.pop_front();
      return c;
    };
    h.wait_ready = [this](FakeChild& c) -> Status {
      waited.push_back(c.id);
      started_at_wait.push_back(started);
      ++c.waits;
      if (!ready_[static_cast<size_t>(c.id - 1)]) {
        return unavailable("process " + std::to_string(c.id) + " died before it was ready");
      }
      return Status::ok();
    };
    h.channel = [](FakeChild& c) -> ChildChannel& { return c.channel; };
    return h;
  }

 private:
  std::vector<bool> ready_;
};

TEST(WarmPoolTest, TopUpStartsUntilTargetAndCountsStarts) {
  FakeLauncher launcher;
  WorkerBook book;
  WarmPool<FakeChild> pool("cpu", 3, launcher.hooks(), book);
  ASSERT_TRUE(pool.top_up().is_ok());
  EXPECT_EQ(pool.size(), 3u);
  EXPECT_EQ(launcher.started, 3);
  ASSERT_TRUE(pool.top_up().is_ok());  // already full: starts nothing
  EXPECT_EQ(launcher.started, 3);
  EXPECT_EQ(book.counters().processes_started, 3);
  EXPECT_EQ(book.counters().restarts, 0);
}

TEST(WarmPoolTest, TopUpStopsAtTheFirstStartErrorAndRecordsIt) {
  FakeLauncher launcher;
  launcher.start_failures = 1;
  WorkerBook book;
  WarmPool<FakeChild> pool("cpu", 2, launcher.hooks(), book);
  Status s = pool.top_up();
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable);
  EXPECT_EQ(pool.size(), 0u);
  Json status = Json::object();
  book.fill_status(status);
  EXPECT_EQ(status["last_error"], "fork failed (fake)");
}

TEST(WarmPoolTest, TakeHandsOutTheOldestWaitingProcess) {
  FakeLauncher launcher;
  WorkerBook book;
  WarmPool<FakeChild> pool("cpu", 2, launcher.hooks(), book);
  ASSERT_TRUE(pool.top_up().is_ok());
  auto first = pool.take();
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ((*first)->id, 1);
  auto second = pool.take();
  ASSERT_TRUE(second.is_ok());
  EXPECT_EQ((*second)->id, 2);
  EXPECT_EQ(pool.size(), 0u);
  // Empty: a new one is started on demand.
  auto third = pool.take();
  ASSERT_TRUE(third.is_ok());
  EXPECT_EQ((*third)->id, 3);
}

TEST(WarmPoolTest, TakeRetiresAProcessLostBeforeReadyAndCountsTheRestart) {
  FakeLauncher launcher;
  launcher.ready_script = {false, true};
  WorkerBook book;
  WarmPool<FakeChild> pool("cpu", 1, launcher.hooks(), book);
  ASSERT_TRUE(pool.top_up().is_ok());
  auto child = pool.take();
  ASSERT_TRUE(child.is_ok());
  EXPECT_EQ((*child)->id, 2);
  EXPECT_EQ(launcher.waited, (std::vector<int>{1, 2}));
  const auto c = book.counters();
  EXPECT_EQ(c.processes_started, 2);
  EXPECT_EQ(c.child_crashes, 1);
  EXPECT_EQ(c.restarts, 1);
  Json status = Json::object();
  book.fill_status(status);
  EXPECT_EQ(status["last_error"], "process 1 died before it was ready");
  EXPECT_EQ(status["child_warmup_ms"], 20.0);  // the ready one's
}

TEST(WarmPoolTest, TakeGivesUpAfterItsAttemptsWithTheLastError) {
  FakeLauncher launcher;
  launcher.ready_script = {false, false, false, true};
  WorkerBook book;
  WarmPool<FakeChild> pool("cpu", 0, launcher.hooks(), book);
  auto child = pool.take(3);
  ASSERT_FALSE(child.is_ok());
  EXPECT_EQ(child.status().message(), "process 3 died before it was ready");
  EXPECT_EQ(launcher.started, 3);
  EXPECT_EQ(book.counters().child_crashes, 3);
}

TEST(WarmPoolTest, TakeWithOnlyStartFailuresReturnsTheStartError) {
  FakeLauncher launcher;
  launcher.start_failures = 5;
  WorkerBook book;
  WarmPool<FakeChild> pool("cpu", 1, launcher.hooks(), book);
  auto child = pool.take(2);
  ASSERT_FALSE(child.is_ok());
  EXPECT_EQ(child.status().message(), "fork failed (fake)");
  EXPECT_EQ(launcher.start_failures, 3);
  EXPECT_EQ(book.counters().processes_started, 0);
}

TEST(WarmPoolTest, WarmAllWaitsForEachAndRetiresTheLost) {
  FakeLauncher launcher;
  launcher.ready_script = {true, false, true};
  WorkerBook book;
  WarmPool<FakeChild> pool("cpu", 3, launcher.hooks(), book);
  EXPECT_EQ(pool.warm_all(), 2u);
  EXPECT_EQ(launcher.waited, (std::vector<int>{1, 2, 3}));
  // The lost one is replaced by the next top-up, and that start is a restart.
  ASSERT_TRUE(pool.top_up().is_ok());
  EXPECT_EQ(pool.size(), 3u);
  EXPECT_EQ(book.counters().restarts, 1);
  auto first = pool.take();
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ((*first)->id, 1);
}

TEST(WarmPoolTest, StartMissingCountsTheWarmingOnesAndAdoptKeepsOnlyTheReady) {
  FakeLauncher launcher;
  launcher.ready_script = {true, true, false};
  WorkerBook book;
  WarmPool<FakeChild> pool("cpu", 2, launcher.hooks(), book);
  // Two runner threads each start one outside the pool: a third start finds none missing.
  auto a = pool.start_missing();
  auto b = pool.start_missing();
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  ASSERT_NE(*a, nullptr);
  ASSERT_NE(*b, nullptr);
  auto none = pool.start_missing();
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(*none, nullptr);
  EXPECT_EQ(pool.size(), 0u);  // neither is handed out before it is adopted
  std::unique_ptr<FakeChild> second = std::move(b).value();
  const Status second_ready = pool.wait_ready(*second);
  pool.adopt(std::move(second), second_ready);
  EXPECT_EQ(pool.size(), 1u);
  // One is still warming: none is missing yet.
  EXPECT_EQ(*pool.start_missing(), nullptr);
  std::unique_ptr<FakeChild> first = std::move(a).value();
  pool.adopt(std::move(first), pool.wait_ready(*first));
  EXPECT_EQ(pool.size(), 2u);
  auto taken = pool.take();
  ASSERT_TRUE(taken.is_ok());
  EXPECT_EQ((*taken)->id, 2);  // adopted first, so handed out first
  // A replacement that dies before it is ready is killed, counted, and not kept.
  auto third = pool.start_missing();
  ASSERT_TRUE(third.is_ok());
  ASSERT_NE(*third, nullptr);
  std::unique_ptr<FakeChild> lost = std::move(third).value();
  const Status lost_ready = pool.wait_ready(*lost);
  EXPECT_FALSE(lost_ready);
  pool.adopt(std::move(lost), lost_ready);
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(book.counters().processes_started, 3);
  // The next start replaces the lost one, and counts as a restart.
  auto fourth = pool.start_missing();
  ASSERT_TRUE(fourth.is_ok());
  ASSERT_NE(*fourth, nullptr);
  EXPECT_EQ(book.counters().restarts, 1);
}

TEST(WarmPoolTest, RefillWarmsUntilTheTargetHoldingTheGuardOnlyWhileEachWarms) {
  FakeLauncher launcher;
  WorkerBook book;
  WarmPool<FakeChild> pool("cpu", 3, launcher.hooks(), book);
  Mutex mu;  // the lock refill() takes around the pool
  std::vector<int> guarded;
  int alive = 0;
  pool.refill(mu, [&](FakeChild& child) -> std::shared_ptr<void> {
    EXPECT_TRUE(mu.try_lock());  // never called with the pool's lock held
    mu.unlock();
    guarded.push_back(child.id);
    ++alive;
    return std::shared_ptr<void>(nullptr, [&alive](void*) { --alive; });
  });
  EXPECT_EQ(pool.size(), 3u);
  EXPECT_EQ(guarded, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(alive, 0);  // each guard released once its process was ready
  // A process lost while it warms stops the refill; the next one replaces it.
  (void)pool.take();
  launcher.ready_script = {false};
  pool.refill(mu, [](FakeChild&) { return std::shared_ptr<void>(); });
  EXPECT_EQ(pool.size(), 2u);
  pool.refill(mu, [](FakeChild&) { return std::shared_ptr<void>(); });
  EXPECT_EQ(pool.size(), 3u);
  EXPECT_EQ(book.counters().restarts, 1);
}

TEST(WarmPoolTest, QueuedJobsRaiseTheTargetAndTheMissingProcessesWarmTogether) {
  FakeLauncher launcher;
  WorkerBook book;
  WarmPool<FakeChild> pool("cuda:0", 1, launcher.hooks(), book, 4);
  Mutex mu;
  std::condition_variable adopted;
  pool.warm_all();
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(pool.max_target(), 4);
  pool.set_demand(9);  // a batch: as many as allowed
  EXPECT_EQ(pool.target(), 4);
  launcher.started_at_wait.clear();
  pool.refill(mu, [](FakeChild&) { return std::shared_ptr<void>(); });
  // All three missing processes were started before the refill waited for the first.
  EXPECT_EQ(launcher.started_at_wait, (std::vector<int>{4, 4, 4}));
  EXPECT_EQ(launcher.waited, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(pool.size(), 4u);
  EXPECT_EQ(pool.most_warming(), 3);
  EXPECT_EQ(pool.warming(), 0);
  // The queue drained: the target falls back, the warm processes stay for the next jobs.
  pool.set_demand(0);
  EXPECT_EQ(pool.target(), 1);
  pool.refill(
      mu, [](FakeChild&) { return std::shared_ptr<void>(); }, &adopted);
  EXPECT_EQ(pool.size(), 4u);
  EXPECT_EQ(launcher.started, 4);
}

TEST(WarmPoolTest, WithoutAMaximumQueuedJobsDoNotRaiseTheTarget) {
  FakeLauncher launcher;
  WorkerBook book;
  WarmPool<FakeChild> pool("cpu", 2, launcher.hooks(), book);
  pool.set_demand(16);
  EXPECT_EQ(pool.target(), 2);
}

TEST(WarmPoolTest, ClearRetiresEveryWaitingProcess) {
  FakeLauncher launcher;
  WorkerBook book;
  WarmPool<FakeChild> pool("cpu", 2, launcher.hooks(), book);
  ASSERT_TRUE(pool.top_up().is_ok());
  pool.clear();
  EXPECT_EQ(pool.size(), 0u);
  EXPECT_EQ(pool.target(), 2);
}

TEST(WorkerBookTest, JobEndsAreCountedByKind) {
  WorkerBook book;
  book.set_state(WorkerState::kBusy);
  book.note_job_end(ChildJobEnd::Kind::kResult, WorkerState::kReady);
  book.note_job_end(ChildJobEnd::Kind::kCrashed, WorkerState::kReady);
  book.note_job_end(ChildJobEnd::Kind::kMemoryLimit, WorkerState::kReady);
  book.note_job_end(ChildJobEnd::Kind::kProtocolError, WorkerState::kReady);
  book.note_job_end(ChildJobEnd::Kind::kTimeout, WorkerState::kReady);
  book.note_job_end(ChildJobEnd::Kind::kCancelled, WorkerState::kFailed);
  const auto c = book.counters();
  EXPECT_EQ(c.jobs_run, 6);
  EXPECT_EQ(c.child_crashes, 3);
  EXPECT_EQ(c.timeouts, 1);
  EXPECT_EQ(book.state(), WorkerState::kFailed);
  Json s = Json::object();
  book.fill_status(s);
  EXPECT_EQ(s["state"], "failed");
  EXPECT_EQ(s["jobs_run"], 6);
  EXPECT_FALSE(s.contains("last_error"));
}

TEST(WorkerBookTest, ReadyMessageWarmupErrorsBecomeTheLastError) {
  WorkerBook book;
  book.note_ready(Json{{"device", {{"name", "H100"}}},
                       {"warmup_ms", 12.5},
                       {"warmup_errors", {{"nvrtc", "not found"}}}});
  Json s = Json::object();
  book.fill_status(s);
  EXPECT_EQ(s["child_device"]["name"], "H100");
  EXPECT_EQ(s["child_warmup_ms"], 12.5);
  EXPECT_EQ(s["last_error"], "warm-up: {\"nvrtc\":\"not found\"}");
}

TEST(WorkerBookTest, StateNamesAreTheOnesHealthReports) {
  EXPECT_EQ(worker_state_name(WorkerState::kStopped), "stopped");
  EXPECT_EQ(worker_state_name(WorkerState::kStarting), "starting");
  EXPECT_EQ(worker_state_name(WorkerState::kReady), "ready");
  EXPECT_EQ(worker_state_name(WorkerState::kBusy), "busy");
  EXPECT_EQ(worker_state_name(WorkerState::kFailed), "failed");
}

TEST(WorkerBookTest, TheJobMessageTakesItsDirectoriesFromTheSandbox) {
  ChildSandbox sandbox;
  sandbox.judge_dir = "/data/scratch/py-cpu-1/judge";
  WorkerJob job;
  job.job_id = "job-1";
  job.spec = Json{{"job_id", "job-1"}, {"scratch_dir", "/elsewhere"}};
  Json m = job_message_for(job, sandbox, "/data/cache");
  EXPECT_EQ(m["type"], "job");
  EXPECT_EQ(m["job"]["job_id"], "job-1");
  EXPECT_EQ(m["job"]["scratch_dir"], "/data/scratch/py-cpu-1/judge");
  EXPECT_EQ(m["job"]["cache_dir"], "/data/cache");
}

TEST(WorkerBookTest, OutcomeOfACancelledJobIsCancelledAndACrashIsAResult) {
  ChildJobEnd end;
  end.kind = ChildJobEnd::Kind::kCancelled;
  EXPECT_EQ(outcome_of(end, Json::object()).kind, WorkerOutcome::Kind::kCancelled);
  end.kind = ChildJobEnd::Kind::kCrashed;
  EXPECT_EQ(outcome_of(end, Json::object()).kind, WorkerOutcome::Kind::kResult);
}

}  // namespace
}  // namespace kforge::workers
