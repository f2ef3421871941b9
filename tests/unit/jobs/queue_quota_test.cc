#include "kforge/jobs/queue_quota.h"

#include <gtest/gtest.h>

namespace kforge::jobs {
namespace {

TEST(QueueQuotaTest, PerClientLimitsAre429AndComeFirst) {
  QueueQuota q(
      {.max_jobs = 10, .max_bytes = 1000, .max_jobs_per_client = 2, .max_bytes_per_client = 500});
  EXPECT_TRUE(q.admit("a", 100).is_ok());
  EXPECT_TRUE(q.admit("a", 100).is_ok());
  Status third = q.admit("a", 100);
  EXPECT_EQ(third.code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(third.message().find("--max-queued-per-client 2"), std::string::npos)
      << third.message();
  EXPECT_TRUE(q.admit("b", 400).is_ok());
  Status bytes = q.admit("b", 101);
  EXPECT_EQ(bytes.code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(bytes.message().find("--max-queued-bytes-per-client"), std::string::npos);
  EXPECT_EQ(q.jobs(), 3u);
  EXPECT_EQ(q.bytes(), 600u);
}

TEST(QueueQuotaTest, GlobalLimitsAre503) {
  QueueQuota q(
      {.max_jobs = 3, .max_bytes = 1000, .max_jobs_per_client = 0, .max_bytes_per_client = 0});
  EXPECT_TRUE(q.admit("a", 600).is_ok());
  Status bytes = q.admit("b", 401);
  EXPECT_EQ(bytes.code(), ErrorCode::kUnavailable);
  EXPECT_NE(bytes.message().find("--max-queued-bytes 1000"), std::string::npos) << bytes.message();
  EXPECT_TRUE(q.admit("b", 400).is_ok());
  EXPECT_TRUE(q.admit("c", 0).is_ok());
  Status jobs = q.admit("d", 0);
  EXPECT_EQ(jobs.code(), ErrorCode::kUnavailable);
  EXPECT_NE(jobs.message().find("--max-queued-jobs 3"), std::string::npos);
}

TEST(QueueQuotaTest, ReleaseGivesRoomBackAndForgetsIdleClients) {
  QueueQuota q(
      {.max_jobs = 1, .max_bytes = 100, .max_jobs_per_client = 1, .max_bytes_per_client = 100});
  ASSERT_TRUE(q.admit("a", 100).is_ok());
  EXPECT_FALSE(q.admit("a", 1).is_ok());
  q.release("a", 100);
  EXPECT_EQ(q.jobs(), 0u);
  EXPECT_EQ(q.clients(), 0u);
  EXPECT_TRUE(q.admit("a", 100).is_ok());
  q.release("nobody", 5);  // unknown: ignored
  EXPECT_EQ(q.bytes(), 100u);
}

TEST(QueueQuotaTest, ARequestLargerThanALimitNeverOverflows) {
  QueueQuota q(
      {.max_jobs = 0, .max_bytes = 100, .max_jobs_per_client = 0, .max_bytes_per_client = 0});
  EXPECT_EQ(q.admit("a", SIZE_MAX).code(), ErrorCode::kUnavailable);
  EXPECT_EQ(q.admit("a", 101).code(), ErrorCode::kUnavailable);
  // Recovered jobs are counted even past the limits.
  q.add("recovered", 500);
  EXPECT_EQ(q.bytes(), 500u);
  EXPECT_EQ(q.admit("a", 1).code(), ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace kforge::jobs
