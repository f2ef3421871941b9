// Kernel activity of timed windows: what the device ran, by its own clock (CUPTI activity
// records), attributed to the trials of a profiled pass and summarised with the flags of
// docs/architecture.md "What the GPU time means". The C++ twin of python/kforge_worker/
// timing/activity.py (same attribution rules, bounds, codes and messages), so both workers
// report the same fields the same way. Pure: the CUPTI session is activity_recorder.h.
//
// Attribution: an operation tagged (by external correlation id) as launched inside trial
// i's window is trial i's; one tagged as the protocol's own (flush, spin) is never counted;
// an untagged one (e.g. launched from the device) is trial i's when it overlaps trial i's
// device interval: from the end of its spin to the start of trial i+1's first protocol
// operation. The launch stream is the spin's stream.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kforge/common/json.h"

namespace kforge::cuda {

inline constexpr int kProfiledTrials = 5;
inline constexpr double kDisagreeRatio = 0.10;  // event time vs activity: max(10 %, 5 us)
inline constexpr double kDisagreeFloorMs = 0.005;
inline constexpr double kProfilerOverheadRatio = 0.25;  // profiled vs timed event medians
inline constexpr const char* kNotMeasuredOnCpu = "not measured on cpu";

// One device operation (times in microseconds on the profiler's clock).
struct DeviceOp {
  std::string name;
  std::string kind = "kernel";  // kernel | memcpy | memset
  std::optional<std::array<int, 3>> grid;
  std::optional<std::array<int, 3>> block;
  uint32_t stream = 0;
  double start_us = 0;
  double duration_us = 0;

  double end_us() const { return start_us + duration_us; }
  Json to_json() const;  // {name, kind, grid, block, duration_ms, stream}
};

enum class OpOwner { kUnknown, kWindow, kFlush, kSpin };

// A device operation with what its launch was tagged with.
struct TaggedOp {
  DeviceOp op;
  OpOwner owner = OpOwner::kUnknown;
  int trial = -1;
};

struct WindowActivity {
  int trial = 0;
  std::vector<DeviceOp> ops;
  std::optional<uint32_t> launch_stream;

  double kernel_time_us() const;
  double busy_us() const;  // the union of the operations' intervals
  bool has_kernel() const;
  std::vector<uint32_t> other_streams() const;  // sorted, unique
};

struct ActivityFlag {
  std::string code;
  std::string message;
  Json to_json() const { return Json{{"code", code}, {"message", message}}; }
};

// The `kernel_activity` object of a result (times in ms; nullopt where not measured).
struct KernelActivity {
  bool measured = false;
  std::string reason;  // why it was not measured
  std::string source;
  int trials = 0;
  std::optional<double> kernel_time_ms;
  std::optional<double> busy_ms;
  std::optional<double> idle_gap_ms;
  std::optional<double> event_ms;
  std::optional<uint32_t> launch_stream;
  std::vector<DeviceOp> kernels;  // of the trial with the (lower) median kernel time
  std::vector<ActivityFlag> flags;

  Json to_json() const;
};

KernelActivity activity_not_measured(std::string reason);
double union_length(std::vector<std::pair<double, double>> intervals);

// Windows 0..trials-1 from the tagged operations of a profiled pass.
std::vector<WindowActivity> windows_from_ops(const std::vector<TaggedOp>& ops, int trials);

// The activity of windows whose event times are `event_ms` (same order); `timed_median_ms`
// is the timed trials' median, for the profiler-overhead check.
KernelActivity summarize_activity(const std::vector<WindowActivity>& windows,
                                  const std::vector<double>& event_ms,
                                  std::optional<double> timed_median_ms, std::string source);

// The flags (codes no_kernel, other_streams, idle_gap, kernel_time_exceeds_event,
// profiler_overhead) of a summarised activity.
std::vector<ActivityFlag> activity_flags(const std::vector<WindowActivity>& windows,
                                         const KernelActivity& activity,
                                         std::optional<double> timed_median_ms);

}  // namespace kforge::cuda
