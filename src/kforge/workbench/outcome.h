// What one finished job says about the kernel, in the workbench's terms: a verdict, the error
// an agent can act on (tracebacks point at the version's file, not at the job's scratch
// copy), correctness numbers, timings, the inputs' shapes, captured output, honesty flags,
// and the achieved bandwidth / FLOP rate when the op's bytes and FLOPs are known.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/model/job.h"
#include "kforge/workbench/input_cases.h"
#include "kforge/workbench/work_formula.h"

namespace kforge::workbench {

struct CaseOutcome {
  std::string label;
  std::string job_id;
  // ok | compile_error | runtime_error | mismatch | timeout | crash | memory_limit (verdicts
  // on the kernel) | reference_error | input_error (reference_code or test_input_code failed:
  // no verdict) | job_failed | cancelled
  std::string verdict = "ok";
  bool compiled = false;
  std::optional<bool> correct;  // nullopt when no correctness verdict was reached
  std::string error;
  Json correctness;  // {max_abs_error, max_rel_error, mismatch_count, numel, atol, rtol, trials}
  Json timing;       // {median_ms, mean_ms, min_ms, max_ms, std_ms, trials, method} or null
  Json ref_timing;   // the reference's, for a compare
  std::optional<double> speedup;
  Json speedup_ci;                  // [low, high], the 95 % interval, or null
  std::string speedup_verdict;      // faster | slower | indistinguishable; "" when not timed
  std::vector<TensorShape> inputs;  // the tensor arguments, in order
  Json input_summary = Json::array();
  std::string output;              // captured stdout + stderr of the kernel (trimmed)
  std::vector<std::string> flags;  // honesty findings and warnings
  std::string device;
  Json roofline;  // see add_roofline

  bool ran() const { return verdict == "ok" || verdict == "mismatch"; }
  Json to_json() const;
};

// A case's speedup as a table cell, from its JSON form (CaseOutcome::to_json): "1.8x",
// "1.8x (1.7-1.9, faster)" with the interval and verdict, "-" when not timed.
std::string case_speedup_cell(const Json& case_json);

// `kernel_file` replaces the job's scratch path of the candidate in tracebacks.
CaseOutcome interpret_job(const InputCase& input_case, const model::JobRecord& job,
                          const std::string& kernel_file);

// peaks[key] when it is a number, else 0 (peaks may be null, {"error": ...} or partial).
double measured_peak(const Json& peaks, const std::string& key);

// Adds `roofline` to a timed outcome: bytes and FLOPs from the op's formulas (torch_ops.json)
// over its inputs, achieved GB/s and TFLOP/s, and the % of the device's measured peaks
// (`peaks`: {"bandwidth_gb_s", "flop_s": {dtype: value}} from /health, or null).
// Unknown parts say why ("no formula for this kernel name", "peaks not measured").
void add_roofline(CaseOutcome& outcome, const Json* op, const Json& peaks);

}  // namespace kforge::workbench
