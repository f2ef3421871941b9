#include "kforge/common/iso8601.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

TEST(Iso8601Test, WritesUtcWithMillisecondsAndReadsItBack) {
  EXPECT_EQ(iso8601_ms(1795642723123), "2026-11-25T21:38:43.123Z");
  EXPECT_EQ(iso8601_ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(parse_iso8601_ms("2026-11-25T21:38:43.123Z"), 1795642723123);
  EXPECT_EQ(parse_iso8601_ms(iso8601_ms(1764000000007)), 1764000000007);
}

TEST(Iso8601Test, AnythingButTheFixedWidthShapeIsZero) {
  EXPECT_EQ(parse_iso8601_ms("yesterday"), 0);
  EXPECT_EQ(parse_iso8601_ms(""), 0);
  EXPECT_EQ(parse_iso8601_ms("2026-11-25T21:38:43Z"), 0);       // no milliseconds
  EXPECT_EQ(parse_iso8601_ms("2026-11-25T21:38:43.12xZ"), 0);   // not a digit
  EXPECT_EQ(parse_iso8601_ms("+026-11-25T21:38:43.123Z"), 0);   // a sign
  EXPECT_EQ(parse_iso8601_ms("2026-11-25 21:38:43.123Z"), 0);   // no T
  EXPECT_EQ(parse_iso8601_ms("2026-11-25T21:38:43.123Z "), 0);  // trailing text
}

}  // namespace
}  // namespace kforge
