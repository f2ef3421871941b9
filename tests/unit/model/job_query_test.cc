#include "kforge/model/job_query.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kforge::model {
namespace {

TEST(JobCursorTest, RoundTripsAndIsUrlSafe) {
  const JobKey key{1795642723123, "4f2a9c0e1b7d4e3f8a6b5c4d3e2f1a0b"};
  const std::string cursor = encode_job_cursor(key);
  EXPECT_EQ(cursor.rfind("c1", 0), 0u);
  EXPECT_EQ(cursor.find_first_not_of("0123456789abcdef", 2), std::string::npos);
  auto back = decode_job_cursor(cursor, "query.cursor");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, key);
  // An id with a colon (a batch's, say) survives too: only the first colon splits.
  auto odd = decode_job_cursor(encode_job_cursor({5, "a:b"}), "c");
  ASSERT_TRUE(odd.is_ok());
  EXPECT_EQ(odd->id, "a:b");
}

TEST(JobCursorTest, RefusesWhatItDidNotWrite) {
  const std::vector<std::string> cases = {
      "",
      "zz",
      "c2" + encode_job_cursor({1, "x"}).substr(2),
      "c1abc",
      "c1ZZ",
      "c1" + std::string("3a78"),                // ":x", no time
      encode_job_cursor({1, "x"}).substr(0, 6),  // "1:" cut before the id
      "c1" + std::string("2d313a78"),            // "-1:x"
      "c1" + std::string(600, 'a')};
  for (const std::string& bad : cases) {
    auto key = decode_job_cursor(bad, "query.cursor");
    ASSERT_FALSE(key.is_ok()) << bad;
    EXPECT_EQ(key.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(key.status().field_path(), "query.cursor") << bad;
  }
}

}  // namespace
}  // namespace kforge::model
