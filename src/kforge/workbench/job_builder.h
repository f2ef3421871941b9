// How an execution tool becomes kforge jobs (docs/workbench.md "How a call becomes jobs").
//
// The kernel file and the test inputs are one `torch` candidate (KernelBench style): the
// version's source, unchanged, followed by a harness that defines `ModelNew`, whose forward
// calls the file's entry function (`solve` unless entry_function says otherwise) as
// `solve(*args, **kwargs)`, and `get_inputs()`, which runs test_input_code in a fresh scope
// (with `torch` and `DEVICE` defined) and returns its `args` (kwargs travel as a trailing
// marker dict). The reference_code and the same harness are a `torch` reference whose
// `Model.forward` calls `reference(*args, **kwargs)`. A call with a reference is a compare job
// (the reference's get_inputs defines each trial's inputs, drawn under the server's seed, and
// both sides get clones); without one, an evaluate job. Each input case (input_cases.h) is one
// job. Line numbers of errors in the candidate are those of the kernel file, since the harness
// comes after it; the harness starts at a `# ---- kforge ... ----` line, from which the worker
// runs the source as kforge's own code under another name
// (python/kforge_worker/candidate/loaders.py), so a frame of the harness is never reported as a
// line of the file. On the cpu device the candidate also carries the Triton interpreter fix
// (kernels/interpreter_compat.py).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/model/request.h"
#include "kforge/workbench/input_cases.h"

namespace kforge::workbench {

enum class Purpose { kRun, kValidate, kMeasure, kBenchmark };

struct ExecutionSpec {
  Purpose purpose = Purpose::kRun;
  std::string kernel_source;
  std::string entry = "solve";
  std::string test_input_code;
  std::optional<std::string> reference_code;  // required for kValidate
  std::string device;                         // "cpu", "cuda:0", ...
  std::optional<double> rtol;
  std::optional<double> atol;
  std::optional<int> warmup;       // warm-up calls before timing
  std::optional<int> rep;          // at most this many timed trials
  std::optional<int> trials;       // correctness trials (fresh inputs each)
  std::string interpreter_compat;  // appended to the candidate on the cpu device
};

struct PlannedJob {
  InputCase input_case;
  model::JobRequest request;
};

// The jobs of one call, one per input case. kInvalidArgument naming the argument for bad
// input (an entry that is not an identifier, a validation without reference_code, a `sizes`
// that is not a literal).
StatusOr<std::vector<PlannedJob>> plan_jobs(const ExecutionSpec& spec);

// The harness text that follows the kernel (exposed for tests and docs).
std::string candidate_harness(const std::string& entry, const std::string& test_input_code,
                              int case_index);
std::string reference_harness(const std::string& test_input_code, int case_index);

}  // namespace kforge::workbench
