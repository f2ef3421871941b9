// What a speedup is worth: its 95 % interval and the verdict it supports, the same rules for
// every place that reports one (both workers' results, the workbench's get_best_kernel and
// benchmark_kernel, kforge bench's Phase 4, kforge batch).
//
// Inside a job the interval comes from both sides' trial times (a bootstrap: the workers'
// timing code). Across jobs (versions timed one after another, a bench row against torch)
// only summaries are left, so the interval comes from each side's time and standard error:
// normal on the log scale, then widened by the device's systematic error, what moves between
// runs that no run's own spread shows (the machine's load, which process ran first).
//
// Example:
//   auto a = TimeEstimate::of_median(0.52, /*std_ms=*/0.01, /*trials=*/40);
//   auto b = TimeEstimate::of_median(0.50, 0.01, 40);
//   SpeedupInterval ci = ratio_interval(a, b, systematic_error("cuda:0"));
//   speedup_verdict(ci);  // "indistinguishable": 1.04 with 3 % either side covers 1
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"

namespace kforge::model {

inline constexpr double kSpeedupConfidence = 0.95;
// With fewer trials than this on either side, an interval over trials is the range of the
// ratios of any reference trial to any candidate trial (a bootstrap has too few values to
// resample); over estimates, ratio_interval uses Student's t for the fewer trials.
inline constexpr int64_t kSpeedupMinTrials = 5;
// What identical kernels read apart between runs, beyond the runs' own spread
// (docs/benchmarks.md, identity): ~10 % on a 2-core cpu machine, ~3 % on an H200.
inline constexpr double kCpuSystematic = 0.10;
inline constexpr double kGpuSystematic = 0.03;
// Within one job on a GPU the candidate is timed through the judge's clock from its own
// process and the reference in the judge: the two paths read identical kernels of 2-6 us up
// to ~0.4 us apart on an H200 (docs/benchmarks.md, identity), which no fraction covers at
// every size. Each side's median is taken as uncertain by this much as well.
inline constexpr double kGpuSystematicMs = 0.00025;

// The systematic error of timings on `device` ("cpu", "cuda", "cuda:N").
double systematic_error(std::string_view device);

struct SpeedupInterval {
  double low = 0, high = 0;
  bool covers(double x) const { return low <= x && x <= high; }
  // [low, high]; null when unbounded (no spread known: fewer than 2 trials).
  Json to_json() const { return std::isfinite(high) ? Json::array({low, high}) : Json(nullptr); }
};

// "faster" (the whole interval above 1), "slower" (below) or "indistinguishable" (around
// 1); "" without an interval.
std::string speedup_verdict(const std::optional<SpeedupInterval>& interval);

// A time in ms, its standard error and the trials behind it.
struct TimeEstimate {
  double ms = 0;
  double se_ms = 0;
  int64_t trials = 0;

  // A median of `trials` samples of standard deviation `std_ms` (se ≈ 1.2533 σ/√n).
  static TimeEstimate of_median(double median_ms, double std_ms, int64_t trials);
  // A mean of `trials` samples (se = σ/√n).
  static TimeEstimate of_mean(double mean_ms, double std_ms, int64_t trials);
  // From a timing summary {median_ms|mean_ms, std_ms, trials} (`key`: which of the two is
  // the time); nullopt when the time is missing or not positive.
  static std::optional<TimeEstimate> from_json(const Json& timing, const char* key);
};

// The geometric mean of per-size estimates (the workbench's version time) and the arithmetic
// mean (kforge bench's Final); the standard error by the delta method; trials: the fewest.
// nullopt when `parts` is empty or a time is not positive.
std::optional<TimeEstimate> geometric_mean(const std::vector<TimeEstimate>& parts);
std::optional<TimeEstimate> arithmetic_mean(const std::vector<TimeEstimate>& parts);

// The kSpeedupConfidence interval of numerator.ms / denominator.ms (normal in the logs, with
// Student's t quantile for the fewer trials of the two), widened by `systematic` (a
// fraction) on each side; [0, inf) when either side has fewer than 2 trials (a point
// estimate: no spread to go by, so never faster or slower).
SpeedupInterval ratio_interval(const TimeEstimate& numerator, const TimeEstimate& denominator,
                               double systematic);

// `interval`, of a ratio of medians numerator_ms / denominator_ms, widened for `absolute_ms`
// of uncertainty in each median: low by (1 - a/numerator) / (1 + a/denominator), high by
// (1 + a/numerator) / (1 - a/denominator), infinite when the denominator is not above a.
SpeedupInterval widened_by_time(SpeedupInterval interval, double numerator_ms,
                                double denominator_ms, double absolute_ms);

}  // namespace kforge::model
