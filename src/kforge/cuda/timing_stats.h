// Statistics of timed trials and the adaptive stop rule (DESIGN.md "Timing"), identical to
// the Python worker's timing.py so both workers report the same numbers the same way.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/model/request.h"

namespace kforge::cuda {

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

  // The `runtime_stats` object of the result (unit "ms").
  Json to_json() const;
};

// Linear interpolation between closest ranks (numpy's default); q in [0, 100].
double percentile(const std::vector<double>& sorted, double q);
// (sample std / sqrt(n)) / mean; +inf with fewer than two samples.
double relative_standard_error(const std::vector<double>& samples);
// Why to stop after these samples, or "" to take another trial.
std::string stop_reason(const std::vector<double>& samples, const model::TimingOptions& options,
                        double elapsed_ms);
TimingStats compute_stats(const std::vector<double>& samples_ms, std::string method);

}  // namespace kforge::cuda
