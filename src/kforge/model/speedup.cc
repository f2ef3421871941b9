#include "kforge/model/speedup.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kforge::model {
namespace {

constexpr double kZ95 = 1.959964;             // the normal quantile of kSpeedupConfidence
constexpr double kMedianEfficiency = 1.2533;  // sqrt(pi / 2)

double relative_se(const TimeEstimate& t) {
  return t.ms > 0 ? t.se_ms / t.ms : 0.0;
}

int64_t fewest_trials(const std::vector<TimeEstimate>& parts) {
  int64_t fewest = parts.front().trials;
  for (const auto& p : parts)
    fewest = std::min(fewest, p.trials);
  return fewest;
}

// The two-sided 95 % quantile of Student's t for the standard error of `trials` trials (the
// normal one from 30 on).
double t95(int64_t trials) {
  static constexpr double kT[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                  2.060,  2.056, 2.052, 2.048, 2.045};
  const int64_t df = std::max<int64_t>(trials - 1, 1);
  return df <= 29 ? kT[df - 1] : kZ95;
}

bool all_positive(const std::vector<TimeEstimate>& parts) {
  return !parts.empty() &&
         std::all_of(parts.begin(), parts.end(), [](const TimeEstimate& p) { return p.ms > 0; });
}

}  // namespace

double systematic_error(std::string_view device) {
  return device == "cpu" ? kCpuSystematic : kGpuSystematic;
}

std::string speedup_verdict(const std::optional<SpeedupInterval>& interval) {
  if (!interval) return "";
  if (interval->low > 1.0) return "faster";
  if (interval->high < 1.0) return "slower";
  return "indistinguishable";
}

TimeEstimate TimeEstimate::of_median(double median_ms, double std_ms, int64_t trials) {
  const double n = static_cast<double>(std::max<int64_t>(trials, 1));
  return {median_ms, kMedianEfficiency * std::max(std_ms, 0.0) / std::sqrt(n), trials};
}

TimeEstimate TimeEstimate::of_mean(double mean_ms, double std_ms, int64_t trials) {
  const double n = static_cast<double>(std::max<int64_t>(trials, 1));
  return {mean_ms, std::max(std_ms, 0.0) / std::sqrt(n), trials};
}

std::optional<TimeEstimate> TimeEstimate::from_json(const Json& timing, const char* key) {
  if (!timing.is_object()) return std::nullopt;
  const Json time = timing.value(key, Json());
  if (!time.is_number() || time.get<double>() <= 0) return std::nullopt;
  const Json std_ms = timing.value("std_ms", Json());
  const Json trials = timing.value("trials", Json());
  const double s = std_ms.is_number() ? std_ms.get<double>() : 0.0;
  const int64_t n = trials.is_number_integer() ? trials.get<int64_t>() : 0;
  const std::string_view which = key;
  return which == "mean_ms" ? of_mean(time.get<double>(), s, n)
                            : of_median(time.get<double>(), s, n);
}

std::optional<TimeEstimate> geometric_mean(const std::vector<TimeEstimate>& parts) {
  if (!all_positive(parts)) return std::nullopt;
  const double n = static_cast<double>(parts.size());
  double log_sum = 0, log_var = 0;
  for (const auto& p : parts) {
    log_sum += std::log(p.ms);
    log_var += relative_se(p) * relative_se(p);
  }
  const double ms = std::exp(log_sum / n);
  return TimeEstimate{ms, ms * std::sqrt(log_var) / n, fewest_trials(parts)};
}

std::optional<TimeEstimate> arithmetic_mean(const std::vector<TimeEstimate>& parts) {
  if (!all_positive(parts)) return std::nullopt;
  const double n = static_cast<double>(parts.size());
  double sum = 0, var = 0;
  for (const auto& p : parts) {
    sum += p.ms;
    var += p.se_ms * p.se_ms;
  }
  return TimeEstimate{sum / n, std::sqrt(var) / n, fewest_trials(parts)};
}

SpeedupInterval widened_by_time(SpeedupInterval interval, double numerator_ms,
                                double denominator_ms, double absolute_ms) {
  if (absolute_ms <= 0) return interval;
  const double num = std::max(numerator_ms, 1e-12), den = std::max(denominator_ms, 1e-12);
  interval.low *= std::max(0.0, 1.0 - absolute_ms / num) / (1.0 + absolute_ms / den);
  interval.high = absolute_ms < den
                      ? interval.high * (1.0 + absolute_ms / num) / (1.0 - absolute_ms / den)
                      : std::numeric_limits<double>::infinity();
  return interval;
}

SpeedupInterval ratio_interval(const TimeEstimate& numerator, const TimeEstimate& denominator,
                               double systematic) {
  if (std::min(numerator.trials, denominator.trials) < 2) {
    return {0.0, std::numeric_limits<double>::infinity()};
  }
  const double ratio = numerator.ms / std::max(denominator.ms, 1e-12);
  const double a = relative_se(numerator), b = relative_se(denominator);
  const double q = t95(std::min(numerator.trials, denominator.trials));
  const double spread = std::exp(q * std::sqrt(a * a + b * b));
  return {ratio / spread * (1.0 - systematic), ratio * spread * (1.0 + systematic)};
}

}  // namespace kforge::model
