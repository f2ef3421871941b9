#include "kforge/common/iso8601.h"

#include <charconv>
#include <cstdio>
#include <ctime>

namespace kforge {

std::string iso8601_ms(int64_t unix_ms) {
  const auto seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%.*s.%03dZ", static_cast<int>(n), buf,
                static_cast<int>(unix_ms % 1000));
  return out;
}

int64_t parse_iso8601_ms(std::string_view text) {
  // Fixed width: "YYYY-MM-DDTHH:MM:SS.mmmZ", each field all digits.
  constexpr std::string_view kShape = "0000-00-00T00:00:00.000Z";
  if (text.size() != kShape.size()) return 0;
  for (size_t i = 0; i < kShape.size(); ++i) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    if (kShape[i] == '0' ? !digit : text[i] != kShape[i]) return 0;
  }
  auto field = [&](size_t at, size_t width) {
    int value = 0;
    std::from_chars(text.data() + at, text.data() + at + width, value);  // digits: cannot fail
    return value;
  };
  std::tm tm{};
  tm.tm_year = field(0, 4) - 1900;
  tm.tm_mon = field(5, 2) - 1;
  tm.tm_mday = field(8, 2);
  tm.tm_hour = field(11, 2);
  tm.tm_min = field(14, 2);
  tm.tm_sec = field(17, 2);
  return static_cast<int64_t>(timegm(&tm)) * 1000 + field(20, 3);
}

}  // namespace kforge
