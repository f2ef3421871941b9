// The job spec: the `job` of the worker protocol's `job` message (docs/worker-protocol.md
// "Job spec"), the one canonical shape both workers read.
//
// The server resolves every default into it (to_json writes every field; timing has all its
// options), so a worker holds no defaults of its own: parse_job_spec requires every field and
// reads `kernel`/`reference` with the same rules as a REST request (parse.h, kernel_rules.h).
// Only `atol`/`rtol` may be null: the tolerance then depends on each output's dtype
// (tests/protocol/tolerances.json). tests/protocol/specs holds specs both workers must
// accept or reject alike (a gtest and a pytest read them).
#pragma once

#include <string>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/request.h"

namespace kforge::model {

struct JobSpec {
  std::string job_id;
  JobRequest request;       // kind, kernel, reference, trials, timing, tolerances, seed, timeout
  std::string device;       // "cpu" | "cuda:N"
  std::string scratch_dir;  // the job's working directory (the supervisor's side adds it)
  std::string cache_dir;    // persists across jobs
  Json device_metrics;      // {ncu, sections, timeout_s} to run under Nsight Compute, or null
  Json reference_reuse;     // {dir, key, sha256} for a compare of a batch, or null
};

// The canonical spec; device_metrics and reference_reuse only when not null.
Json to_json(const JobSpec& spec);

// kInvalidArgument naming the field ("kernel.io.args[0].name", "timing.max_trials") for a
// spec that is not canonical or breaks a rule.
StatusOr<JobSpec> parse_job_spec(const Json& spec);

}  // namespace kforge::model
