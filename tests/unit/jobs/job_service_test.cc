#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <future>

#include "fakes/fake_worker.h"
#include "kforge/common/clock.h"
#include "kforge/jobs/job_service_impl.h"
#include "kforge/model/parse.h"
#include "kforge/model/serialize.h"
#include "kforge/store/sqlite/sqlite_store.h"

namespace kforge::jobs {
namespace {

using testing::FakeWorker;

model::JobRequest torch_request(const std::string& device = "") {
  Json body = {{"kernel", {{"source_code", "class Model: pass"}, {"kernel_type", "torch"}}}};
  if (!device.empty()) body["device"] = device;
  auto r = model::parse_evaluate_request(body, model::RequestLimits{});
  EXPECT_TRUE(r.is_ok());
  return *r;
}

class JobServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kforge-jobs-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    service_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<store::SqliteStore> open_store() {
    store::SqliteStore::Options o;
    o.path = dir_ / "kforge.db";
    auto s = store::SqliteStore::open(o);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return std::move(s).value();
  }

  void start_service(int max_attempts = 3, QueueLimits queue = {}) {
    std::vector<DeviceWorkers> devices;
    DeviceWorkers cpu;
    cpu.device = {"cpu", false};
    auto worker = std::make_unique<FakeWorker>();
    worker_ = worker.get();
    cpu.by_type["python"] = std::move(worker);
    devices.push_back(std::move(cpu));
    JobServiceImpl::Options o;
    o.max_attempts = max_attempts;
    o.queue = queue;
    service_ = std::make_unique<JobServiceImpl>(o, open_store(), std::move(devices),
                                                SystemClock::instance());
    ASSERT_TRUE(service_->start().is_ok());
  }

  model::JobRecord wait_done(const std::string& id) {
    std::promise<model::JobRecord> done;
    auto sub = service_->when_done(id, [&](const model::JobRecord& r) { done.set_value(r); });
    EXPECT_TRUE(sub.is_ok());
    auto f = done.get_future();
    EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return f.get();
  }

  std::filesystem::path dir_;
  std::unique_ptr<JobServiceImpl> service_;
  FakeWorker* worker_ = nullptr;
};

TEST_F(JobServiceTest, RunsAJobAndStoresItsResult) {
  start_service();
  auto job = service_->submit(torch_request(), "test");
  ASSERT_TRUE(job.is_ok()) << job.status().to_string();
  EXPECT_EQ(job->state, model::JobState::kQueued);
  model::JobRecord done = wait_done(job->id);
  EXPECT_EQ(done.state, model::JobState::kSucceeded);
  EXPECT_EQ(done.result["runtime"], 1.5);
  // The worker got the canonical spec with a server-drawn seed and the device.
  EXPECT_EQ(done.result["echo"]["device"], "cpu");
  EXPECT_EQ(done.result["echo"]["kernel"]["kernel_type"], "torch");
  EXPECT_TRUE(done.result["echo"]["seed"].is_number_integer());
  auto again = service_->get(job->id);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->state, model::JobState::kSucceeded);
  EXPECT_EQ(again->attempts, 1);
  EXPECT_EQ(again->device, "cpu");
}

TEST_F(JobServiceTest, UnknownDeviceIsRejectedNamingTheField) {
  start_service();
  auto job = service_->submit(torch_request("cuda:7"), "test");
  ASSERT_FALSE(job.is_ok());
  EXPECT_EQ(job.status().field_path(), "device");
  EXPECT_NE(job.status().message().find("cpu"), std::string::npos);
  EXPECT_EQ(service_->get("nope").status().code(), ErrorCode::kNotFound);
}

TEST_F(JobServiceTest, CancelsQueuedAndRunningJobs) {
  start_service();
  worker_->hold(true);
  auto running = service_->submit(torch_request(), "test");
  auto queued = service_->submit(torch_request(), "test");
  ASSERT_TRUE(running.is_ok() && queued.is_ok());
  ASSERT_TRUE(worker_->wait_started(1));
  ASSERT_TRUE(service_->cancel(queued->id, "").is_ok());
  ASSERT_TRUE(service_->cancel(running->id, "user asked").is_ok());
  EXPECT_EQ(wait_done(queued->id).state, model::JobState::kCancelled);
  model::JobRecord r = wait_done(running->id);
  EXPECT_EQ(r.state, model::JobState::kCancelled);
  EXPECT_EQ(r.error, "user asked");
  EXPECT_EQ(worker_->started_jobs().size(), 1u);
}

TEST_F(JobServiceTest, QueuedJobsAreAnnouncedToTheWorkerThatWillRunThem) {
  // Worker::expect_jobs: how many jobs wait for the worker (a pipelined device warms that
  // many processes ahead), counted up as they are queued and down as they start.
  start_service();
  worker_->hold(true);
  auto running = service_->submit(torch_request(), "test");
  ASSERT_TRUE(running.is_ok());
  ASSERT_TRUE(worker_->wait_started(1));
  auto first = service_->submit(torch_request(), "test");
  auto second = service_->submit(torch_request(), "test");
  ASSERT_TRUE(first.is_ok() && second.is_ok());
  std::vector<int> announced = worker_->announced();
  ASSERT_GE(announced.size(), 2u);
  EXPECT_EQ(std::vector<int>(announced.end() - 2, announced.end()), (std::vector<int>{1, 2}));
  // A cancelled queued job is no longer counted: the next announcement says so.
  ASSERT_TRUE(service_->cancel(first->id, "").is_ok());
  worker_->hold(false);
  worker_->release_all();
  EXPECT_EQ(wait_done(second->id).state, model::JobState::kSucceeded);
  EXPECT_EQ(worker_->announced().back(), 0);
}

TEST_F(JobServiceTest, AClientsCancelReasonCannotPassForAShutdown) {
  // The shutdown requeues its running jobs; it was recognised by its reason text, which a
  // client's cancel may carry too (the job then went back to the queue instead of ending).
  start_service();
  worker_->hold(true);
  auto running = service_->submit(torch_request(), "test");
  ASSERT_TRUE(running.is_ok());
  ASSERT_TRUE(worker_->wait_started(1));
  ASSERT_TRUE(service_->cancel(running->id, "server shutting down").is_ok());
  model::JobRecord r = wait_done(running->id);
  EXPECT_EQ(r.state, model::JobState::kCancelled);
  EXPECT_EQ(r.error, "server shutting down");
}

TEST_F(JobServiceTest, ProgressIsDeliveredAndMonotonic) {
  start_service();
  worker_->hold(true);
  // A job holding the device first, so the observed one waits in the queue until it is
  // subscribed to (it reported its first progress before the subscription once, under TSan).
  auto blocker = service_->submit(torch_request(), "test");
  ASSERT_TRUE(blocker.is_ok());
  ASSERT_TRUE(worker_->wait_started(1));
  auto job = service_->submit(torch_request(), "test");
  ASSERT_TRUE(job.is_ok());
  std::mutex mu;
  std::vector<JobProgress> seen;
  auto sub = service_->on_progress(job->id, [&](const JobProgress& p) {
    std::lock_guard lock(mu);
    seen.push_back(p);
  });
  ASSERT_TRUE(sub.is_ok());
  worker_->release_all();
  worker_->hold(false);
  wait_done(job->id);
  std::lock_guard lock(mu);
  ASSERT_GE(seen.size(), 2u);
  for (size_t i = 1; i < seen.size(); ++i)
    EXPECT_GE(seen[i].fraction, seen[i - 1].fraction);
}

TEST_F(JobServiceTest, JobChangesReachEveryListenerUntilItUnsubscribes) {
  start_service();
  std::mutex mu;
  std::vector<JobChange> seen;
  auto sub = service_->on_job_changes([&](const JobChange& c) {
    std::lock_guard lock(mu);
    seen.push_back(c);
  });
  ASSERT_TRUE(sub.is_ok());
  auto job = service_->submit(torch_request(), jobs::Caller("test", {"alice", model::Role::kUser}));
  ASSERT_TRUE(job.is_ok());
  wait_done(job->id);
  service_->unsubscribe(*sub);
  auto later = service_->submit(torch_request(), "test");
  ASSERT_TRUE(later.is_ok());
  wait_done(later->id);
  std::lock_guard lock(mu);
  ASSERT_GE(seen.size(), 3u);  // queued, running (with its phases), success
  EXPECT_EQ(seen.front().state, model::JobState::kQueued);
  EXPECT_EQ(seen.back().state, model::JobState::kSucceeded);
  bool ran = false;
  for (const JobChange& c : seen) {
    EXPECT_EQ(c.job_id, job->id);  // nothing of the job after unsubscribe
    EXPECT_EQ(c.submitter, "alice");
    ran = ran || (c.state == model::JobState::kRunning && !c.phase.empty());
  }
  EXPECT_TRUE(ran);
}

TEST_F(JobServiceTest, WorkerFailureFailsTheJob) {
  start_service();
  worker_->fail_next = true;
  auto job = service_->submit(torch_request(), "test");
  ASSERT_TRUE(job.is_ok());
  model::JobRecord r = wait_done(job->id);
  EXPECT_EQ(r.state, model::JobState::kFailed);
  EXPECT_EQ(r.error, "fake worker failure");
}

TEST_F(JobServiceTest, RecoversInterruptedJobsAfterARestart) {
  // Jobs a previous server accepted and never finished: one queued, one running, and
  // one that was already started max_attempts times.
  {
    auto store = open_store();
    auto request = model::to_request_json(torch_request());
    int i = 0;
    for (model::JobState state :
         {model::JobState::kQueued, model::JobState::kRunning, model::JobState::kRunning}) {
      model::JobRecord r;
      r.id = "job" + std::to_string(i);
      r.request = request;
      r.device = "gpu";
      r.created_ms = 1000 + i;
      ASSERT_TRUE(store->insert_job(r).is_ok());
      int starts = (i == 2) ? 3 : (state == model::JobState::kRunning ? 1 : 0);
      for (int s = 0; s < starts; ++s) {
        if (s > 0) {
          ASSERT_TRUE(store->requeue(r.id).is_ok());
        }
        ASSERT_TRUE(store->mark_running(r.id, "cpu", 2000).is_ok());
      }
      ++i;
    }
  }
  start_service(/*max_attempts=*/3);
  EXPECT_EQ(wait_done("job0").state, model::JobState::kSucceeded);
  model::JobRecord second = wait_done("job1");
  EXPECT_EQ(second.state, model::JobState::kSucceeded);
  auto stored = service_->get("job1");
  ASSERT_TRUE(stored.is_ok());
  EXPECT_EQ(stored->attempts, 2);
  auto third = service_->get("job2");
  ASSERT_TRUE(third.is_ok());
  EXPECT_EQ(third->state, model::JobState::kFailed);
  EXPECT_NE(third->error.find("interrupted 3 times"), std::string::npos);
  Json stats = service_->stats();
  EXPECT_EQ(stats["jobs_recovered"], 2);
  EXPECT_EQ(stats["jobs"]["success"], 2);
  EXPECT_EQ(stats["jobs"]["failed"], 1);
}

// The jobs of a `kforge mcp` call that answers itself are process-bound: killed (or stopped)
// before they finish, that process can never receive them, so the next start ends them as
// cancelled, saying why, and runs only the jobs someone can still fetch.
TEST_F(JobServiceTest, AProcessBoundJobIsNotRunAgainAfterARestart) {
  start_service();
  worker_->hold(true);
  Caller stdio("stdio");
  stdio.process_bound = true;
  auto running = service_->submit(torch_request(), stdio);
  ASSERT_TRUE(running.is_ok()) << running.status().to_string();
  ASSERT_TRUE(worker_->wait_started(1));
  auto queued = service_->submit(torch_request(), stdio);
  auto durable = service_->submit(torch_request(), "stdio");  // a task's: polled later
  ASSERT_TRUE(queued.is_ok() && durable.is_ok());
  EXPECT_TRUE(service_->get(queued->id)->process_bound);
  EXPECT_FALSE(service_->get(durable->id)->process_bound);
  service_.reset();  // the store keeps one running and two queued jobs, as after a kill

  start_service();
  for (const auto& id : {running->id, queued->id}) {
    model::JobRecord ended = wait_done(id);
    EXPECT_EQ(ended.state, model::JobState::kCancelled) << id;
    EXPECT_NE(ended.error.find("the kforge mcp process that submitted it ended before it "
                               "finished"),
              std::string::npos)
        << ended.error;
  }
  EXPECT_EQ(wait_done(durable->id).state, model::JobState::kSucceeded);
  // The new engine ran the durable job and nothing else.
  EXPECT_EQ(worker_->started_jobs(), std::vector<std::string>{durable->id});
  EXPECT_EQ(service_->stats()["jobs_recovered"], 1);
}

// Issue #8 item 8: unfinished work is bounded per client (429) and in total (503), and a
// finished job gives its room back.
TEST_F(JobServiceTest, QueueLimitsRefuseByClientThenInTotal) {
  start_service(3, {.max_jobs = 3,
                    .max_bytes = 1 << 20,
                    .max_jobs_per_client = 2,
                    .max_bytes_per_client = 1 << 20});
  worker_->hold(true);
  auto a1 = service_->submit(torch_request(), "a");
  auto a2 = service_->submit(torch_request(), "a");
  ASSERT_TRUE(a1.is_ok() && a2.is_ok());
  auto a3 = service_->submit(torch_request(), "a");
  EXPECT_EQ(a3.status().code(), ErrorCode::kResourceExhausted);
  auto b1 = service_->submit(torch_request(), "b");
  ASSERT_TRUE(b1.is_ok());
  auto b2 = service_->submit(torch_request(), "b");
  EXPECT_EQ(b2.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(b2.status().message().find("--max-queued-jobs"), std::string::npos);
  Json stats = service_->stats();
  EXPECT_EQ(stats["queue"]["jobs"], 3);
  EXPECT_EQ(stats["queue"]["clients"], 2);
  EXPECT_GT(stats["queue"]["bytes"].get<int64_t>(), 0);
  // Refused jobs were never stored.
  EXPECT_EQ(stats["jobs"]["queued"].get<int64_t>() + stats["jobs"]["running"].get<int64_t>(), 3);
  worker_->hold(false);
  worker_->release_all();
  for (const auto& job : {a1, a2, b1})
    EXPECT_EQ(wait_done(job->id).state, model::JobState::kSucceeded);
  EXPECT_EQ(service_->stats()["queue"]["jobs"], 0);
  EXPECT_TRUE(service_->submit(torch_request(), "a").is_ok());
}

TEST_F(JobServiceTest, QueuedBytesAreTheStoredRequestSize) {
  Json body = {{"kernel",
                {{"source_code", "class Model: pass\n# " + std::string(4000, 'x')},
                 {"kernel_type", "torch"}}}};
  auto big = model::parse_evaluate_request(body, model::RequestLimits{});
  ASSERT_TRUE(big.is_ok());
  start_service(
      3,
      {.max_jobs = 100, .max_bytes = 10000, .max_jobs_per_client = 0, .max_bytes_per_client = 0});
  worker_->hold(true);
  ASSERT_TRUE(service_->submit(*big, "a").is_ok());
  ASSERT_TRUE(service_->submit(*big, "b").is_ok());
  auto third = service_->submit(*big, "c");
  EXPECT_EQ(third.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(third.status().message().find("--max-queued-bytes"), std::string::npos);
  worker_->hold(false);
  worker_->release_all();
}

// The engine keeps no copy of a queued request: the worker gets what the store holds.
TEST_F(JobServiceTest, ARunningJobsRequestIsReadBackFromTheStore) {
  start_service();
  auto job = service_->submit(torch_request(), "test");
  ASSERT_TRUE(job.is_ok());
  model::JobRecord done = wait_done(job->id);
  ASSERT_EQ(done.state, model::JobState::kSucceeded);
  EXPECT_EQ(done.result["echo"]["kernel"]["source_code"], "class Model: pass");
  EXPECT_EQ(done.result["echo"]["seed"], job->request["seed"]);
}

TEST_F(JobServiceTest, CleanupDropsOldFinishedJobs) {
  start_service();
  auto job = service_->submit(torch_request(), "test");
  ASSERT_TRUE(job.is_ok());
  wait_done(job->id);
  auto kept = service_->cleanup(std::chrono::hours(1));
  ASSERT_TRUE(kept.is_ok());
  EXPECT_EQ(*kept, 0);
  auto dropped = service_->cleanup(std::chrono::seconds(-1));
  ASSERT_TRUE(dropped.is_ok());
  EXPECT_EQ(*dropped, 1);
  EXPECT_EQ(service_->get(job->id).status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace kforge::jobs
