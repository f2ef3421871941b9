#include "kforge/jobs/retention.h"

#include <gtest/gtest.h>

#include <thread>

#include "fakes/fake_job_service.h"

namespace kforge::jobs {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RetentionTest, ParsesDurations) {
  EXPECT_EQ(*parse_retention("0", "f"), seconds(0));
  EXPECT_EQ(*parse_retention("3600", "f"), seconds(3600));
  EXPECT_EQ(*parse_retention("45s", "f"), seconds(45));
  EXPECT_EQ(*parse_retention("90m", "f"), seconds(5400));
  EXPECT_EQ(*parse_retention("24h", "f"), hours(24));
  EXPECT_EQ(*parse_retention("7d", "f"), hours(7 * 24));
  for (const char* bad : {"", "h", "-1", "1.5h", "10w", "1e3", "99999999999999999d", " 1h"}) {
    auto r = parse_retention(bad, "--job-retention");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().field_path(), "--job-retention");
  }
}

TEST(RetentionTest, IntervalIsATenthOfTheRetentionWithinBounds) {
  EXPECT_EQ(RetentionSweeper::interval_for({.retention = hours(24)}), std::chrono::minutes(5));
  EXPECT_EQ(RetentionSweeper::interval_for({.retention = seconds(20)}), seconds(2));
  EXPECT_EQ(RetentionSweeper::interval_for({.retention = seconds(3)}), seconds(1));
  EXPECT_EQ(RetentionSweeper::interval_for({.retention = hours(1), .interval = milliseconds(7)}),
            milliseconds(7));
}

bool exists(testing::FakeJobService& jobs, const std::string& id) {
  return jobs.get(id).is_ok();
}

TEST(RetentionTest, DeletesFinishedJobsOlderThanTheRetentionOnly) {
  testing::FakeJobService jobs;
  model::JobRequest request;
  auto old_job = jobs.submit(request, "test");
  auto recent_job = jobs.submit(request, "test");
  auto queued_job = jobs.submit(request, "test");
  ASSERT_TRUE(old_job.is_ok() && recent_job.is_ok() && queued_job.is_ok());
  ASSERT_TRUE(jobs.finish(old_job->id, Json{{"compiled", true}}).is_ok());
  ASSERT_TRUE(jobs.finish(recent_job->id, Json{{"compiled", true}}).is_ok());
  ASSERT_TRUE(jobs.age_finished_job(old_job->id, hours(3)).is_ok());
  {
    RetentionSweeper sweeper(jobs, {.retention = hours(2), .interval = milliseconds(10)});
    for (int i = 0; i < 500 && exists(jobs, old_job->id); ++i)
      std::this_thread::sleep_for(milliseconds(10));
    EXPECT_FALSE(exists(jobs, old_job->id));
  }
  EXPECT_TRUE(exists(jobs, recent_job->id));
  EXPECT_TRUE(exists(jobs, queued_job->id));
}

TEST(RetentionTest, ZeroKeepsEverything) {
  testing::FakeJobService jobs;
  auto job = jobs.submit(model::JobRequest{}, "test");
  ASSERT_TRUE(jobs.finish(job->id, Json::object()).is_ok());
  ASSERT_TRUE(jobs.age_finished_job(job->id, hours(24 * 365)).is_ok());
  {
    RetentionSweeper sweeper(jobs, {.retention = seconds(0), .interval = milliseconds(1)});
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(exists(jobs, job->id));
}

}  // namespace
}  // namespace kforge::jobs
