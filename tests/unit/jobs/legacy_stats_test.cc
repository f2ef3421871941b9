#include "kforge/jobs/legacy_stats.h"

#include <gtest/gtest.h>

namespace kforge::jobs {
namespace {

using Summary = std::map<model::JobState, store::Store::StateSummary>;

TEST(LegacyStatsTest, JobStatsUseTheOldStatusNames) {
  const int64_t now = 1'000'000;
  Summary summary = {{model::JobState::kQueued, {2, 2 * (now - 10'000)}},
                     {model::JobState::kRunning, {3, 3 * (now - 20'000)}},
                     {model::JobState::kSucceeded, {4, 4 * (now - 40'000)}},
                     {model::JobState::kFailed, {1, now - 50'000}},
                     {model::JobState::kCancelled, {1, now - 50'000}}};
  Json stats = legacy_job_stats(summary, {"correctness", "timing_candidate"}, now);
  EXPECT_EQ(stats["total_jobs"], 11);
  EXPECT_EQ(stats["by_status"]["submitted"], 2);
  EXPECT_EQ(stats["by_status"]["validating"], 1);
  EXPECT_EQ(stats["by_status"]["profiling"], 1);
  EXPECT_EQ(stats["by_status"]["compiling"], 1);  // running, phase unknown to this server
  EXPECT_EQ(stats["by_status"]["completed"], 4);
  EXPECT_EQ(stats["by_status"]["failed"], 2);  // failed + cancelled
  // (2*10 + 3*20 + 4*40 + 50 + 50) / 11 seconds
  EXPECT_NEAR(stats["average_age"].get<double>(), 340.0 / 11.0, 1e-9);
  Json empty = legacy_job_stats({}, {}, now);
  EXPECT_EQ(empty["total_jobs"], 0);
  EXPECT_EQ(empty["average_age"], 0.0);
}

TEST(LegacyStatsTest, CountersFollowTheJobs) {
  LegacyMetrics m;
  m.job_submitted(1000);
  m.job_submitted(2000);
  m.job_started("cuda:0", 0.5);
  Json compiled = {{"compiled", true},
                   {"correctness", true},
                   {"runtime_stats", {{"mean", 1.0}}},
                   {"metadata", {{"compile", {{"cache", "hit"}}}}}};
  FinishedJobSample done{"cuda:0", model::JobState::kSucceeded, &compiled, true, 3.0, 2.0, 0.25,
                         1.5};
  m.job_finished(done);
  Json broken = {{"compiled", false}, {"correctness", false}};
  FinishedJobSample failed{"cpu", model::JobState::kSucceeded, &broken, false, 1.0, 0.0, 0.1, -1};
  m.job_finished(failed);
  Json s = m.snapshot(120.0, 3000);
  EXPECT_EQ(s["compilation_metrics"]["total_compilations"], 2);
  EXPECT_EQ(s["compilation_metrics"]["successful_compilations"], 1);
  EXPECT_EQ(s["compilation_metrics"]["cache_hits"], 1);
  EXPECT_EQ(s["compilation_metrics"]["success_rate"], 0.5);
  EXPECT_EQ(s["compilation_metrics"]["max_time_seconds"], 0.25);
  EXPECT_EQ(s["profiling_metrics"]["total_profilings"], 1);
  EXPECT_EQ(s["profiling_metrics"]["correctness_passed"], 1);
  EXPECT_EQ(s["profiling_metrics"]["gpu_usage_times"]["cuda:0"], 1.5);
  EXPECT_EQ(s["gpu_utilization"]["gpu_acquisitions"], 1);
  EXPECT_EQ(s["gpu_utilization"]["active_sessions"], 0);
  EXPECT_EQ(s["gpu_utilization"]["average_wait_time_seconds"], 0.5);
  EXPECT_EQ(s["throughput"]["total_requests"], 2);
  EXPECT_EQ(s["throughput"]["completed_requests"], 2);
  EXPECT_EQ(s["throughput"]["server_uptime_minutes"], 2.0);
  EXPECT_EQ(s["throughput"]["requests_per_minute"], 1.0);
  EXPECT_EQ(s["timestamp"], 3.0);
}

TEST(LegacyStatsTest, EmptyCountersHaveTheOldDefaults) {
  Json s = LegacyMetrics().snapshot(0.0, 0);
  EXPECT_EQ(s["compilation_metrics"]["total_compilations"], 0);
  EXPECT_EQ(s["compilation_metrics"]["success_rate"], 1.0);
  EXPECT_EQ(s["profiling_metrics"]["correctness_rate"], 1.0);
  EXPECT_EQ(s["throughput"]["success_rate"], 1.0);
  EXPECT_EQ(s["gpu_utilization"]["average_wait_time_seconds"], 0.0);
}

}  // namespace
}  // namespace kforge::jobs
