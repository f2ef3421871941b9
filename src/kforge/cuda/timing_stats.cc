#include "kforge/cuda/timing_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>

namespace kforge::cuda {

Json TimingStats::to_json() const {
  Json j = {{"mean", mean},
            {"std", std},
            {"min", min},
            {"max", max},
            {"median", median},
            {"percentile_5", percentile_5},
            {"percentile_95", percentile_95},
            {"percentile_99", percentile_99},
            {"trials", trials},
            {"rse", rse},
            {"method", method},
            {"unit", "ms"},
            {"l2_flush", l2_flush},
            {"warmup_calls", warmup_calls},
            {"stop_reason", stop_reason},
            {"device_sync_median", nullptr},
            {"spin_us", nullptr},
            {"enqueue_ms", nullptr},
            {"launch_not_hidden_trials", nullptr},
            {"window_overhead_us", nullptr},
            {"event_median", nullptr}};
  if (device_sync_median) j["device_sync_median"] = *device_sync_median;
  if (spin_us) j["spin_us"] = *spin_us;
  if (enqueue_ms) j["enqueue_ms"] = *enqueue_ms;
  if (launch_not_hidden_trials) j["launch_not_hidden_trials"] = *launch_not_hidden_trials;
  if (window_overhead_us) j["window_overhead_us"] = *window_overhead_us;
  if (event_median) j["event_median"] = *event_median;
  return j;
}

TimingStats without_window_overhead(TimingStats stats, double overhead_ms) {
  stats.event_median = stats.median;
  stats.window_overhead_us = overhead_ms * 1e3;
  for (double* v : {&stats.mean, &stats.min, &stats.max, &stats.median, &stats.percentile_5,
                    &stats.percentile_95, &stats.percentile_99}) {
    *v = std::max(kEventResolutionMs, *v - overhead_ms);
  }
  return stats;
}

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  double pos = static_cast<double>(sorted.size() - 1) * q / 100.0;
  auto lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

double relative_standard_error(const std::vector<double>& samples) {
  const size_t n = samples.size();
  if (n < 2) return std::numeric_limits<double>::infinity();
  double mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n);
  if (mean <= 0) {
    bool all_same =
        std::all_of(samples.begin(), samples.end(), [&](double s) { return s == mean; });
    return all_same ? 0.0 : std::numeric_limits<double>::infinity();
  }
  double var = 0;
  for (double s : samples)
    var += (s - mean) * (s - mean);
  var /= static_cast<double>(n - 1);
  return std::sqrt(var) / std::sqrt(static_cast<double>(n)) / mean;
}

std::string stop_reason(const std::vector<double>& samples, const model::TimingOptions& options,
                        double elapsed_ms) {
  const int n = static_cast<int>(samples.size());
  if (n < std::max(1, options.min_trials)) return "";
  if (n >= options.max_trials) return "max_trials";
  if (elapsed_ms >= options.budget_ms) return "budget";
  if (n >= 2 && relative_standard_error(samples) < options.rse_target) return "rse_target";
  return "";
}

TimingStats compute_stats(const std::vector<double>& samples_ms, std::string method) {
  TimingStats s;
  s.method = std::move(method);
  if (samples_ms.empty()) return s;
  std::vector<double> v = samples_ms;
  std::sort(v.begin(), v.end());
  const auto n = static_cast<double>(v.size());
  s.trials = static_cast<int>(v.size());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double var = 0;
  for (double x : v)
    var += (x - s.mean) * (x - s.mean);
  s.std = v.size() > 1 ? std::sqrt(var / (n - 1)) : 0.0;
  s.rse = v.size() > 1 ? relative_standard_error(v) : 0.0;
  s.min = v.front();
  s.max = v.back();
  s.median = percentile(v, 50);
  s.percentile_5 = percentile(v, 5);
  s.percentile_95 = percentile(v, 95);
  s.percentile_99 = percentile(v, 99);
  return s;
}

double spin_us_for(double enqueue_ms) {
  if (!std::isfinite(enqueue_ms) || enqueue_ms < 0) return kSpinCapUs;
  return std::min(kSpinCapUs,
                  std::max(kSpinFloorUs, kSpinFactor * enqueue_ms * 1e3 + kSpinMarginUs));
}

double next_spin_us(double spin_us, double observed_enqueue_ms) {
  if (spin_us >= kSpinCapUs) return spin_us;
  return std::min(kSpinCapUs, std::max(2.0 * spin_us, spin_us_for(observed_enqueue_ms)));
}

std::string launch_not_hidden_message(int uncovered, int trials, double enqueue_ms) {
  if (trials <= 0 || uncovered <= kLaunchNotHiddenFraction * trials) return "";
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "launch not hidden: in %d of %d trials the host was still enqueueing the call "
                "(median enqueue %.4g ms) when the device reached the start event, so the event "
                "time includes host time (the call synchronises with the host, or launches "
                "faster kernels than the host can enqueue)",
                uncovered, trials, enqueue_ms);
  return buf;
}

std::string stream_skew_message(double sync_median_ms, double event_median_ms) {
  if (sync_median_ms - event_median_ms <=
      std::max(kStreamSkewRatio * event_median_ms, kStreamSkewFloorMs)) {
    return "";
  }
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "work outside the launch stream: device-synchronised median %.4g ms vs CUDA-event "
                "median %.4g ms (work on other streams or on the host is not covered by the "
                "events)",
                sync_median_ms, event_median_ms);
  return buf;
}

namespace {

// The median of `count` values drawn with replacement from `values`.
double resampled_median(const std::vector<double>& values, std::mt19937_64& rng,
                        std::vector<double>& scratch) {
  std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
  scratch.resize(values.size());
  for (double& v : scratch)
    v = values[pick(rng)];
  std::sort(scratch.begin(), scratch.end());
  return percentile(scratch, 50);
}

}  // namespace

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return percentile(values, 50);
}

std::optional<SpeedupInterval> speedup_interval(const std::vector<double>& reference_ms,
                                                const std::vector<double>& candidate_ms,
                                                uint64_t seed) {
  if (reference_ms.size() < 2 || candidate_ms.size() < 2) return std::nullopt;
  constexpr double lo = 1.0 - model::kGpuSystematic, hi = 1.0 + model::kGpuSystematic;
  if (static_cast<int64_t>(std::min(reference_ms.size(), candidate_ms.size())) <
      model::kSpeedupMinTrials) {
    const auto [ref_min, ref_max] = std::minmax_element(reference_ms.begin(), reference_ms.end());
    const auto [cand_min, cand_max] = std::minmax_element(candidate_ms.begin(), candidate_ms.end());
    return model::widened_by_time(
        {*ref_min / std::max(*cand_max, 1e-12) * lo, *ref_max / std::max(*cand_min, 1e-12) * hi},
        median_of(reference_ms), median_of(candidate_ms), model::kGpuSystematicMs);
  }
  std::mt19937_64 rng(seed);
  std::vector<double> ratios;
  ratios.reserve(kSpeedupResamples);
  std::vector<double> scratch;
  for (int i = 0; i < kSpeedupResamples; ++i) {
    const double ref = resampled_median(reference_ms, rng, scratch);
    const double cand = resampled_median(candidate_ms, rng, scratch);
    ratios.push_back(ref / std::max(cand, 1e-12));
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1.0 - model::kSpeedupConfidence) / 2.0 * 100.0;
  return model::widened_by_time(
      {percentile(ratios, tail) * lo, percentile(ratios, 100.0 - tail) * hi},
      median_of(reference_ms), median_of(candidate_ms), model::kGpuSystematicMs);
}

std::vector<double> without_window_overhead(std::vector<double> samples_ms, double overhead_ms) {
  for (double& v : samples_ms)
    v = std::max(kEventResolutionMs, v - overhead_ms);
  return samples_ms;
}

}  // namespace kforge::cuda
