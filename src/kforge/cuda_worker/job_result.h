// The result of a native CUDA job, in the shape of the Python worker's judge/results.py, so a
// client cannot tell from the schema which worker ran its job (docs/worker-protocol.md
// "Result").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/cuda/host_compare.h"
#include "kforge/cuda/kernel_activity.h"
#include "kforge/cuda/timing_stats.h"
#include "kforge/cuda_worker/phase_clock.h"
#include "kforge/model/error_kind.h"

namespace kforge::cuda_worker {

struct TrialResult {
  int trial = 0;
  bool passed = false;
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t mismatch_count = 0;
  std::string message;
};

struct FirstMismatch {
  int trial = 0;
  std::string output;
  std::vector<int64_t> index;
  double expected = 0;
  double actual = 0;
};

struct CorrectnessDetails {
  int trials = 0;
  int trials_passed = 0;
  std::optional<double> atol;
  std::optional<double> rtol;
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t mismatch_count = 0;
  int64_t numel = 0;
  std::optional<FirstMismatch> first_mismatch;
  std::vector<TrialResult> per_trial;
};

// The kernel activity of one timed kernel and its timing flags (judge/results.py's
// kernel_time, kernels, idle_gap_ms, timing_flags, kernel_activity; `ref_` for the
// reference).
struct ActivityResult {
  cuda::KernelActivity activity = cuda::activity_not_measured("not timed");
  std::vector<cuda::ActivityFlag> flags;
};

struct Check {
  std::string name;
  bool passed = true;
  std::string message;
  bool fatal = true;
};

class JobResult {
 public:
  bool compiled = false;
  bool correctness = false;
  double runtime = -1.0;
  std::optional<cuda::TimingStats> runtime_stats;
  double ref_runtime = -1.0;
  std::optional<cuda::TimingStats> ref_runtime_stats;
  std::optional<double> speedup;
  // Its 95 % interval and what that says (cuda::speedup_interval, speedup_verdict).
  std::optional<cuda::SpeedupInterval> speedup_ci;
  std::string speedup_verdict;  // "" when not measured
  ActivityResult activity;
  ActivityResult ref_activity;
  Json device_metrics_raw;  // ncu's output per role (device_metrics.h); null when not asked
  std::optional<model::ErrorKind> error_kind;
  std::optional<std::string> compilation_error;
  std::optional<std::string> runtime_error;
  std::optional<std::string> validation_error;
  std::optional<CorrectnessDetails> correctness_details;
  std::vector<Check> checks;
  std::vector<std::string> warnings;
  Json metadata = Json::object();
  PhaseClock phases;  // becomes `phases_ms`

  // Sets the error kind (the first one wins) and its message field: compilation_error for
  // kCompile, validation_error for kMismatch, runtime_error otherwise.
  void fail(model::ErrorKind kind, const std::string& message);
  // Repeated names keep the first failure (or the single pass).
  void add_check(const std::string& name, bool passed, const std::string& message = "",
                 bool fatal = true);
  void warn(const std::string& message);

  // The wire form; non-finite numbers become "NaN" / "Infinity" / "-Infinity".
  Json to_json() const;
};

// Replaces non-finite numbers anywhere in `value` by their string names (JSON has none).
Json encode_non_finite(Json value);

}  // namespace kforge::cuda_worker
