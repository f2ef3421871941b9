// Time source seam: production code asks a Clock, tests pass a ManualClock.
#pragma once

#include <chrono>
#include <cstdint>

namespace kforge {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time, for durations and deadlines.
  virtual std::chrono::steady_clock::time_point now() const = 0;
  // Wall time in milliseconds since the Unix epoch, for stored timestamps.
  virtual int64_t unix_ms() const = 0;
};

class SystemClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point now() const override {
    return std::chrono::steady_clock::now();
  }
  int64_t unix_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  // The process-wide instance.
  static const SystemClock& instance() {
    static const SystemClock clock;
    return clock;
  }
};

}  // namespace kforge
