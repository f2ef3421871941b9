// Unix milliseconds as ISO-8601 UTC text with milliseconds, "2026-11-25T21:38:43.123Z", and
// back: the one place kforge writes and reads that form (bench.json's times, MCP task times,
// an older kforge's job views).
//
// Example:
//   iso8601_ms(1795642723123) == "2026-11-25T21:38:43.123Z"
//   parse_iso8601_ms("2026-11-25T21:38:43.123Z") == 1795642723123
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kforge {

std::string iso8601_ms(int64_t unix_ms);

// The inverse of iso8601_ms for exactly that fixed-width shape; 0 for anything else.
int64_t parse_iso8601_ms(std::string_view text);

}  // namespace kforge
