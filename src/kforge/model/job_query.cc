#include "kforge/model/job_query.h"

#include <charconv>

namespace kforge::model {
namespace {

constexpr std::string_view kCursorVersion = "c1";
constexpr std::string_view kHexDigits = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string encode_job_cursor(const JobKey& key) {
  const std::string plain = std::to_string(key.created_ms) + ":" + key.id;
  std::string out(kCursorVersion);
  for (unsigned char c : plain) {
    out += kHexDigits[c >> 4];
    out += kHexDigits[c & 0xf];
  }
  return out;
}

StatusOr<JobKey> decode_job_cursor(std::string_view cursor, const std::string& field) {
  auto bad = [&field](const std::string& why) {
    return invalid_argument("is not a cursor this server gave (" + why + ")", field);
  };
  if (cursor.substr(0, kCursorVersion.size()) != kCursorVersion) return bad("unknown version");
  cursor.remove_prefix(kCursorVersion.size());
  if (cursor.size() % 2 != 0 || cursor.size() > 512) return bad("bad length");
  std::string plain;
  for (size_t i = 0; i < cursor.size(); i += 2) {
    const int hi = hex_value(cursor[i]);
    const int lo = hex_value(cursor[i + 1]);
    if (hi < 0 || lo < 0) return bad("not lower-case hex");
    plain += static_cast<char>((hi << 4) | lo);
  }
  const size_t colon = plain.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == plain.size()) {
    return bad("no key");
  }
  JobKey key;
  const char* first = plain.data();
  const char* last = plain.data() + colon;
  const auto [end, err] = std::from_chars(first, last, key.created_ms);
  if (err != std::errc() || end != last || key.created_ms < 0) return bad("bad time");
  key.id = plain.substr(colon + 1);
  return key;
}

}  // namespace kforge::model
