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

// Waits until the job may use the device (the `device_grant` of pipelined stages,
// docs/worker-protocol.md "Device grant"); an error ends the job with error_kind "worker".
using AcquireDeviceFn = std::function<Status()>;

// Runs the job spec (the `job` object) on the warm runtime. Never throws for kernel faults.
// The CPU phase (NVRTC compile, through the cache) runs first; `acquire_device`, when set,
// is called before anything touches the GPU (module load, inputs, correctness, timing).
JobResult run_cuda_job(const Json& spec, WorkerRuntime& runtime, const ProgressFn& progress,
                       const AcquireDeviceFn& acquire_device = {});

// `repeat` launches of the job's `role` ("candidate" | "reference") on its timing inputs,
// then a synchronisation: what `kforge worker cuda --replay` runs under Nsight Compute
// (ncu_runner.h).
Status replay_cuda_job(const Json& spec, WorkerRuntime& runtime, const std::string& role,
                       int repeat = 1);

}  // namespace kforge::cuda_worker
