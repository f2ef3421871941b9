// The bench report: the jobs' results turned into what the logs say (docs/bench.md "Report
// JSON"). Everything the Markdown logs, the charts and the summary show comes from this JSON,
// so `kforge bench --from-json` can render them again in another language.
//
// Per op and row (torch, torch.compile, each version) and size: mean and median time of the
// `runs` timed runs, achieved GB/s and TFLOP/s, speedup vs torch (torch mean / row mean).
// Final = mean of the size means (the skill's score); Speedup = torch Final / row Final. A
// version is correct only if it passed at every size; the best is the correct version with
// the lowest Final. At the large size the best is compared with the measured peak: copy
// bandwidth for memory-bound ops, matmul FLOP/s (same dtype) for compute-bound ones. Each op
// also carries its per-op tests directory and, per version, the tries of the regeneration
// loop (regenerate.h), which the logs' checklist and Phase 3 show.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/bench/bench_plan.h"
#include "kforge/common/json.h"

namespace kforge::bench {

// How one planned job ended.
struct JobOutcome {
  bool submitted = false;
  std::string job_id;
  std::string state;  // "success", "failed", "cancelled"; empty until it ended
  Json result;        // kernel_exec_result; null when the job produced none
  std::string error;  // why the service could not run it (failed / cancelled jobs)
};

// `outcomes` is parallel to plan.jobs. Times are Unix milliseconds.
Json build_report(const BenchPlan& plan, const std::vector<JobOutcome>& outcomes,
                  int64_t started_ms, int64_t finished_ms);

// Why a version of plan.ops[op] is not correct: "not_loaded" with the load error, or the
// error kind of its first failing size with the error of every failing size, one
// "<size>: <error>" each. nullopt when it is correct at every size of the plan.
struct VersionFailure {
  std::string error_kind;
  std::string error;
};
std::optional<VersionFailure> version_failure(const BenchPlan& plan,
                                              const std::vector<JobOutcome>& outcomes, int op,
                                              const std::string& version);

// One line about a finished job for progress messages: "ok 0.0412 ms" or "failed: <why>".
std::string describe_outcome(const JobOutcome& outcome);

// Bytes per element of a bench dtype (float32 4, float16/bfloat16 2).
int64_t dtype_bytes(const std::string& dtype);

}  // namespace kforge::bench
