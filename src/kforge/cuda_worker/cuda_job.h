// The pipeline of one native CUDA job: compile (through the cache), load, correctness
// trials, timing (docs/worker-protocol.md). Failures of the kernel are results (error_kind
// + message); only a malformed spec gives error_kind "worker".
#pragma once

#include <functional>
#include <string>

#include "kforge/common/json.h"
#include "kforge/cuda_worker/job_result.h"
#include "kforge/cuda_worker/worker_runtime.h"

namespace kforge::cuda_worker {

// (phase, message, partial result): the `progress` message.
using ProgressFn = std::function<void(const std::string&, const std::string&, const Json&)>;

// Runs the job spec (the `job` object) on the warm runtime. Never throws for kernel faults.
JobResult run_cuda_job(const Json& spec, WorkerRuntime& runtime, const ProgressFn& progress);

// `repeat` launches of the job's `role` ("candidate" | "reference") on its timing inputs,
// then a synchronisation: what `kforge worker cuda --replay` runs under Nsight Compute
// (ncu_runner.h).
Status replay_cuda_job(const Json& spec, WorkerRuntime& runtime, const std::string& role,
                       int repeat = 1);

}  // namespace kforge::cuda_worker
