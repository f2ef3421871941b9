// Statistics of timed trials and the adaptive stop rule (docs/evaluation-protocol.md "Timing"
// and "Statistics"), identical to the Python worker's timing/stats.py so both workers report the
// same numbers the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/model/request.h"
#include "kforge/model/speedup.h"

namespace kforge::cuda {

// Spin sizing (timing/timing.py's spin_us_for / next_spin_us): kSpinFactor x the measured host
// enqueue + kSpinMarginUs, within [kSpinFloorUs, kSpinCapUs]; after a trial whose enqueue
// outlasted the spin, at least double (at most kMaxSpinGrowths times).
inline constexpr double kSpinFloorUs = 10.0;
inline constexpr double kSpinFactor = 1.5;
inline constexpr double kSpinMarginUs = 10.0;
inline constexpr double kSpinCapUs = 20000.0;
inline constexpr int kEnqueueSamples = 7;
inline constexpr int kMaxSpinGrowths = 4;
inline constexpr double kLaunchNotHiddenFraction = 0.1;
inline constexpr double kStreamSkewRatio = 0.5;  // 50 % or 0.05 ms
inline constexpr double kStreamSkewFloorMs = 0.05;

struct TimingStats {
  double mean = 0, std = 0, min = 0, max = 0, median = 0;
  double percentile_5 = 0, percentile_95 = 0, percentile_99 = 0;
  int trials = 0;
  double rse = 0;
  std::string method;  // cuda_event | cuda_graph
  bool l2_flush = false;
  int warmup_calls = 0;
  std::string stop_reason;  // rse_target | max_trials | budget
  std::optional<double> device_sync_median;
  // GPU only: the spin before the start event at the last trial, the median host time to
  // enqueue one call, and the trials whose enqueue the spin did not cover.
  std::optional<double> spin_us;
  std::optional<double> enqueue_ms;
  std::optional<int> launch_not_hidden_trials;
  // GPU only: the event window's own device time (without_window_overhead), taken off every
  // location statistic above, and the event-time median before that.
  std::optional<double> window_overhead_us;
  std::optional<double> event_median;

  // The `runtime_stats` object of the result (unit "ms").
  Json to_json() const;
};

// Linear interpolation between closest ranks (numpy's default); q in [0, 100].
double percentile(const std::vector<double>& sorted, double q);
// The median of `values` (any order).
double median_of(std::vector<double> values);
// (sample std / sqrt(n)) / mean; +inf with fewer than two samples.
double relative_standard_error(const std::vector<double>& samples);
// Why to stop after these samples, or "" to take another trial.
std::string stop_reason(const std::vector<double>& samples, const model::TimingOptions& options,
                        double elapsed_ms);
TimingStats compute_stats(const std::vector<double>& samples_ms, std::string method);
// timing/stats.py's without_window_overhead: every location statistic less `overhead_ms`, none
// below kEventResolutionMs; std and rse unchanged.
inline constexpr double kEventResolutionMs = 0.0005;  // CUDA events resolve about 0.5 us
TimingStats without_window_overhead(TimingStats stats, double overhead_ms);

// timing/stats.py's speedup_interval: a 95 % interval of reference median / candidate median by
// the percentile bootstrap over both sides' trials (kSpeedupResamples, each side resampled on
// its own, with `seed`), or with fewer than model::kSpeedupMinTrials on a side the range of
// trial-to-trial ratios, widened by the GPU's systematic error (model/speedup.h); nullopt
// with fewer than 2 trials a side. model::speedup_verdict says what it shows.
inline constexpr int kSpeedupResamples = 2000;
using model::SpeedupInterval;
std::optional<SpeedupInterval> speedup_interval(const std::vector<double>& reference_ms,
                                                const std::vector<double>& candidate_ms,
                                                uint64_t seed);
// Trial times less the event window's own time, none below kEventResolutionMs.
std::vector<double> without_window_overhead(std::vector<double> samples_ms, double overhead_ms);

double spin_us_for(double enqueue_ms);
double next_spin_us(double spin_us, double observed_enqueue_ms);
// The warnings of timing/stats.py: "" when within bounds.
std::string launch_not_hidden_message(int uncovered, int trials, double enqueue_ms);
std::string stream_skew_message(double sync_median_ms, double event_median_ms);

}  // namespace kforge::cuda
