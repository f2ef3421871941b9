// The process behind `kforge worker cuda`: the native CUDA worker child of
// docs/worker-protocol.md. Started by the supervisor with the protocol socket as fd 3
// (stdout/stderr are the supervisor's capture pipes); it warms up (NVRTC, the CUDA context,
// the L2 flush buffer, one launch), sends `ready`, runs exactly one `job`, sends its
// `result` and exits. An illegal address or a trap in a kernel therefore costs this process
// only; the next job runs in a fresh one.
//
// Without a supervisor (`--job spec.json`) it runs one job spec from a file and prints the
// result as JSON on stdout: for debugging and for profilers (ncu) that need a plain process;
// with `--replay spec.json --role R` it launches one kernel of the spec once and exits (the
// process Nsight Compute profiles for device metrics).
#pragma once

#include <filesystem>
#include <string>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/cuda_worker/worker_runtime.h"

namespace kforge::cuda_worker {

// Serves one job over `protocol_fd`; returns the process exit code.
int run_worker_process(const WorkerRuntimeOptions& options, int protocol_fd);

// One job spec from a file (the `job` object of the protocol); the result object.
StatusOr<Json> run_job_file(const WorkerRuntimeOptions& options,
                            const std::filesystem::path& spec_path);

// `--replay`: one launch of the spec's `role` for a profiler (options.profile_target).
Status run_replay_file(const WorkerRuntimeOptions& options, const std::filesystem::path& spec_path,
                       const std::string& role, int repeat = 1);

}  // namespace kforge::cuda_worker
