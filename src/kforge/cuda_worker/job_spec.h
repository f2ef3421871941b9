// The `job` a native CUDA worker receives (docs/worker-protocol.md "Job spec"), validated
// with the same rules as a REST request.
#pragma once

#include <cstdint>
#include <string>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/request.h"

namespace kforge::cuda_worker {

struct NativeJob {
  std::string job_id;
  model::JobRequest request;  // kernel, reference, trials, timing, tolerances, seed
  std::string device;         // "cpu" | "cuda:N"
  std::string scratch_dir;
  std::string cache_dir;  // compile cache: <cache_dir>/cuda
  Json device_metrics;    // {ncu, sections, timeout_s} to run under Nsight Compute; or null
};

// kInvalidArgument with the JSON path for a malformed spec, and for a job whose kernels
// are not all `cuda` (those run in the Python worker).
StatusOr<NativeJob> parse_native_job(const Json& spec);

}  // namespace kforge::cuda_worker
