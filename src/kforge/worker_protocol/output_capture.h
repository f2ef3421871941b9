// Size-capped capture of a child's stdout or stderr: keeps the first and the last
// `cap_bytes / 2` bytes and counts what was dropped in between, so a kernel that prints
// gigabytes cannot exhaust the server's memory or break the protocol channel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kforge::worker_protocol {

class OutputCapture {
 public:
  explicit OutputCapture(size_t cap_bytes = size_t{64} * 1024) : cap_(cap_bytes) {}

  void append(std::string_view bytes);
  // The captured text: head, then "\n[... N bytes omitted ...]\n", then tail.
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
