#include "kforge/common/base64.h"

#include <gtest/gtest.h>

#include "kforge/common/status.h"

namespace kforge {
namespace {

TEST(Base64Test, RoundTripsAllLengths) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    bytes += static_cast<char>(i * 37);
    auto decoded = base64_decode(base64_encode(bytes));
    ASSERT_TRUE(decoded.is_ok());
    EXPECT_EQ(*decoded, bytes);
  }
  EXPECT_EQ(base64_encode("hello"), "aGVsbG8=");
}

TEST(Base64Test, RejectsBadInput) {
  EXPECT_FALSE(base64_decode("a").is_ok());
  EXPECT_FALSE(base64_decode("ab$d").is_ok());
  EXPECT_FALSE(base64_decode("ab=d").is_ok());
  EXPECT_TRUE(base64_decode("aGVs\nbG8=").is_ok());
}

TEST(StatusTest, CarriesPathAndContext) {
  Status s = invalid_argument("must be positive", "kernel.io.args[0]");
  EXPECT_EQ(s.to_string(), "kernel.io.args[0]: must be positive");
  EXPECT_EQ(s.with_context("parsing").message(), "parsing: must be positive");
  EXPECT_TRUE(Status::ok().is_ok());
  StatusOr<int> v = 3;
  EXPECT_EQ(*v, 3);
  StatusOr<int> e = not_found("x");
  EXPECT_EQ(e.status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace kforge
