#include "kforge/bench/bench_run.h"

#include <gtest/gtest.h>

#include <future>

#include "bench/bench_test_support.h"
#include "fakes/fake_job_service.h"
#include "frontends/mcp/mcp_test_support.h"

namespace kforge::bench {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::health_with;
using testing::kernel_library;
using testing::timed_result;

class BenchRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BenchOptions o;
    o.ops = {"softmax"};
    o.sizes = {"small"};
    o.library = kernel_library();
    auto plan = plan_bench(o, health_with({"cpu"}));
    ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
    plan_ = *plan;
    ASSERT_EQ(plan_.jobs.size(), 6u);  // four versions, torch, torch.compile
  }

  std::shared_ptr<BenchRun> start() {
    return BenchRun::start(
        jobs_, threads_.executor(), plan_, "peer 127.0.0.1",
        [this](const BenchProgress& p) {
          std::lock_guard lock(mu_);
          progress_.push_back(p);
        },
        [this](StatusOr<Json> report) { done_.set_value(std::move(report)); });
  }

  // Finishes the i-th submitted job (waiting for its submit) with `result`.
  void finish(size_t i, Json result) {
    ASSERT_TRUE(jobs_.wait_for_jobs(i + 1, seconds(5)));
    ASSERT_TRUE(jobs_.finish(jobs_.job_ids()[i], std::move(result)).is_ok());
  }

  BenchPlan plan_;
  testing::FakeJobService jobs_;
  testing::ThreadExecutor threads_;
  std::mutex mu_;
  std::vector<BenchProgress> progress_;
  std::promise<StatusOr<Json>> done_;
};

TEST_F(BenchRunTest, RunsEveryJobTwoAtATimeAndReports) {
  auto run = start();
  auto future = done_.get_future();
  ASSERT_TRUE(jobs_.wait_for_jobs(2, seconds(5)));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(jobs_.job_ids().size(), 2u) << "at most two jobs in flight";
  for (size_t i = 0; i < plan_.jobs.size(); ++i)
    finish(i, timed_result(0.1 + 0.01 * double(i)));
  ASSERT_EQ(future.wait_for(seconds(5)), std::future_status::ready);
  StatusOr<Json> report = future.get();
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_EQ((*report)["ops"][0]["best"]["kernel"], "v1_baseline");  // the first was fastest
  // Each job was submitted as planned, in order.
  for (size_t i = 0; i < plan_.jobs.size(); ++i) {
    auto request = jobs_.submitted_request(jobs_.job_ids()[i]);
    ASSERT_TRUE(request.has_value());
    EXPECT_EQ(request->kernel.source_code, plan_.jobs[i].request.kernel.source_code);
    EXPECT_EQ(jobs_.submitted_client(jobs_.job_ids()[i]), "peer 127.0.0.1");  // the quota's key
  }
  std::lock_guard lock(mu_);
  ASSERT_EQ(progress_.size(), plan_.jobs.size());
  EXPECT_EQ(progress_.back().done, 6);
  EXPECT_EQ(progress_.back().total, 6);
  EXPECT_EQ(progress_.front().message, "softmax v1_baseline small: ok 0.1 ms");
}

TEST_F(BenchRunTest, CancelStopsTheJobsInFlightAndEndsWithCancelled) {
  auto run = start();
  auto future = done_.get_future();
  ASSERT_TRUE(jobs_.wait_for_jobs(2, seconds(5)));
  run->cancel("the user pressed ^C");
  ASSERT_EQ(future.wait_for(seconds(5)), std::future_status::ready);
  StatusOr<Json> report = future.get();
  ASSERT_FALSE(report.is_ok());
  EXPECT_EQ(report.status().code(), ErrorCode::kCancelled);
  EXPECT_EQ(report.status().message(), "the user pressed ^C");
  for (const auto& id : jobs_.job_ids()) {
    EXPECT_EQ(jobs_.get(id)->state, model::JobState::kCancelled);
  }
  EXPECT_LE(jobs_.job_ids().size(), 3u) << "no job is submitted after a cancel";
}

TEST_F(BenchRunTest, ARefusedSubmitEndsTheRunWithItsReason) {
  jobs_.set_submit_error(invalid_argument("unknown device 'cpu'", "device"));
  auto run = start();
  auto future = done_.get_future();
  ASSERT_EQ(future.wait_for(seconds(5)), std::future_status::ready);
  StatusOr<Json> report = future.get();
  ASSERT_FALSE(report.is_ok());
  EXPECT_EQ(report.status().field_path(), "device");
  EXPECT_NE(report.status().message().find("submitting softmax v1_baseline small"),
            std::string::npos);
}

TEST_F(BenchRunTest, AFailedJobIsAResultNotAnError) {
  auto run = start();
  auto future = done_.get_future();
  ASSERT_TRUE(jobs_.wait_for_jobs(1, seconds(5)));
  ASSERT_TRUE(jobs_.fail(jobs_.job_ids()[0], "the worker crashed").is_ok());
  for (size_t i = 1; i < plan_.jobs.size(); ++i)
    finish(i, timed_result(0.1));
  ASSERT_EQ(future.wait_for(seconds(5)), std::future_status::ready);
  StatusOr<Json> report = future.get();
  ASSERT_TRUE(report.is_ok());
  const Json& v1 = (*report)["ops"][0]["rows"][2];
  EXPECT_EQ(v1["kernel"], "v1_baseline");
  EXPECT_EQ(v1["error"], "small: the job failed: the worker crashed");
}

TEST_F(BenchRunTest, StartJobsEndsWithTheOutcomesInPlanOrder) {
  std::promise<StatusOr<std::vector<JobOutcome>>> done;
  auto future = done.get_future();
  auto run = BenchRun::start_jobs(
      jobs_, threads_.executor(), plan_, "kforge bench", nullptr,
      [&done](StatusOr<std::vector<JobOutcome>> outcomes) { done.set_value(std::move(outcomes)); });
  for (size_t i = 0; i < plan_.jobs.size(); ++i)
    finish(i, timed_result(0.1 + 0.01 * double(i)));
  ASSERT_EQ(future.wait_for(seconds(5)), std::future_status::ready);
  auto outcomes = future.get();
  ASSERT_TRUE(outcomes.is_ok()) << outcomes.status().to_string();
  ASSERT_EQ(outcomes->size(), plan_.jobs.size());
  for (size_t i = 0; i < outcomes->size(); ++i) {
    EXPECT_EQ((*outcomes)[i].job_id, jobs_.job_ids()[i]);
    EXPECT_EQ((*outcomes)[i].state, "success");
  }
}

}  // namespace
}  // namespace kforge::bench
