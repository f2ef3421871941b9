// The `job` a native CUDA worker receives: the canonical job spec (model/job_spec.h), read
// as it is, with the one rule of this worker on top: every kernel is `cuda`.
#pragma once

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/job_spec.h"

namespace kforge::cuda_worker {

using NativeJob = model::JobSpec;

// kInvalidArgument with the JSON path for a malformed spec (model::parse_job_spec), and for
// a job whose kernels are not all `cuda` (those run in the Python worker).
StatusOr<NativeJob> parse_native_job(const Json& spec);

}  // namespace kforge::cuda_worker
