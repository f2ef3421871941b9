// Size-capped capture of a child's stdout or stderr: keeps the first and the last
// `cap_bytes / 2` bytes and counts what was dropped in between, so a kernel that prints
// gigabytes cannot exhaust the server's memory or break the protocol channel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kforge::worker_protocol {

// Room text() keeps for its "omitted" marker (a 20-digit count at most).
inline constexpr size_t kOutputCaptureMarkerBytes = 48;

class OutputCapture {
 public:
  explicit OutputCapture(size_t cap_bytes = size_t{64} * 1024) : cap_(cap_bytes) {}

  void append(std::string_view bytes);
  // The captured text: head, then "\n[... N bytes omitted ...]\n", then tail; at most
  // cap_bytes bytes in all (the tail gives the marker its room) unless cap_bytes is too small
  // to hold the marker a few times over.
  std::string text() const;
  uint64_t total_bytes() const { return total_; }
  bool truncated() const { return total_ > cap_; }

 private:
  size_t cap_;
  std::string head_;
  std::string tail_;  // ring of the last cap_/2 bytes, kept linear (trimmed on append)
  uint64_t total_ = 0;
};

}  // namespace kforge::worker_protocol
