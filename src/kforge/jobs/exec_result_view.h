// `kernel_exec_result` as clients see it: the worker's result (docs/worker-protocol.md) in the
// shape of the kernel evaluation server's KernelExecutionResult (docs/compatibility.md §1),
// kforge's richer data kept in added fields. Both workers (Python and native CUDA) report the same
// result; this is the one place that turns it into the wire shape.
//
// The old server's fields keep their type and meaning:
//   runtime          the candidate's MEAN in ms; 0.0 when it was not timed
//   runtime_stats    {mean, std, min, max, median, percentile_95, percentile_99, ...}; absent
//                    when not timed
//   ref_runtime      (compares) the reference's RuntimeStats object; all zeros when not timed
//   compilation_error  set when compiled is false
//   validation_error   set when compiled is true and correctness is false: the reason
//   metadata.gpu_id    an int (-1 on the cpu device)
// kforge adds runtime_median, ref_runtime_stats, speedup, speedup_ci, speedup_verdict,
// error_kind, runtime_error,
// correctness_details, checks, warnings, metadata.device, ...
//
// The transformation is idempotent, so a view read back (`kforge mcp --server`) and shown
// again is unchanged.
#pragma once

#include "kforge/common/json.h"

namespace kforge::jobs {

// The RuntimeStats fields of the old server, in its order.
inline constexpr const char* kRuntimeStatsFields[] = {
    "mean", "std", "min", "max", "median", "percentile_95", "percentile_99"};

// The result's fields a job view repeats at its top level (beside `kernel_exec_result`), as
// the old server's compare answer did for ref_runtime; a client of a remote server reads
// them back from there (kforge mcp --server).
inline constexpr const char* kTopLevelResultFields[] = {"ref_runtime", "ref_runtime_stats",
                                                        "speedup", "speedup_ci", "speedup_verdict"};

// {mean: 0, std: 0, ..., percentile_99: 0}: the old server's ref_runtime when nothing was timed.
Json zero_runtime_stats();

// The wire form of a worker result; `is_compare` adds ref_runtime. A non-object `result`
// gives an empty object.
Json exec_result_view(const Json& result, bool is_compare);

}  // namespace kforge::jobs
