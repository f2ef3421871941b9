#include "kforge/common/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

#include "kforge/common/errno_message.h"

namespace kforge {
namespace {

TEST(StatusTest, CodesHaveStableNamesAndMessagesTheirPath) {
  EXPECT_EQ(error_code_name(ErrorCode::kOk), "ok");
  EXPECT_EQ(error_code_name(ErrorCode::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(error_code_name(ErrorCode::kPayloadTooLarge), "payload_too_large");
  const Status s = invalid_argument("must be positive", "kernel.io.args[0].value");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.to_string(), "kernel.io.args[0].value: must be positive");
  EXPECT_EQ(not_found("no such job").to_string(), "no such job");
  EXPECT_TRUE(Status::ok().is_ok());
}

TEST(StatusTest, ContextPrefixesTheMessageAndKeepsCodeAndPath) {
  const Status s = invalid_argument("bad", "seed").with_context("request");
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "request: bad");
  EXPECT_EQ(s.field_path(), "seed");
}

StatusOr<int> half(int x) {
  if (x % 2 != 0) return invalid_argument("odd: " + std::to_string(x), "x");
  return x / 2;
}

StatusOr<int> quarter(int x) {
  KF_ASSIGN_OR_RETURN(int h, half(x));
  KF_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(StatusTest, ErrnoBecomesItsTextInOnePlace) {
  EXPECT_EQ(errno_message(ENOENT), "No such file or directory");
  EXPECT_EQ(errno_message(99999), "Unknown error 99999");
  Status s = errno_error("open /x", EACCES);
  EXPECT_EQ(s.code(), ErrorCode::kIo);
  EXPECT_EQ(s.message(), "open /x: Permission denied");
}

TEST(StatusTest, AssignOrReturnPassesTheFirstErrorThrough) {
  EXPECT_EQ(quarter(8).value(), 2);
  const StatusOr<int> r = quarter(6);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "odd: 3");
  StatusOr<std::unique_ptr<int>> moved = std::make_unique<int>(7);
  EXPECT_EQ(*std::move(moved).value(), 7);
}

// Invariants abort in every build (release included), naming what broke.
TEST(StatusDeathTest, ValueOfAnErrorAborts) {
  const StatusOr<int> r = half(3);
  EXPECT_DEATH((void)r.value(), "invariant failed at .*value\\(\\) of x: odd: 3");
}

TEST(StatusDeathTest, StatusOrFromAnOkStatusAborts) {
  EXPECT_DEATH((void)StatusOr<int>(Status::ok()), "invariant failed.*OK status without a value");
}

TEST(StatusDeathTest, KfCheckAbortsWithTheConditionAndWhat) {
  const int queued = 3;
  EXPECT_DEATH(KF_CHECK(queued == 0, "queue drained"),
               "invariant failed at .*queued == 0: queue drained");
  KF_CHECK(queued == 3, "never printed");
}

}  // namespace
}  // namespace kforge
