#include "kforge/cuda_worker/job_spec.h"

namespace kforge::cuda_worker {

StatusOr<NativeJob> parse_native_job(const Json& spec) {
  KF_ASSIGN_OR_RETURN(NativeJob job, model::parse_job_spec(spec));
  const model::JobRequest& r = job.request;
  if (r.kernel.kernel_type != model::KernelType::kCuda) {
    return invalid_argument("the native CUDA worker runs only jobs whose kernels are all 'cuda'",
                            "kernel.kernel_type");
  }
  if (r.reference && r.reference->kernel_type != model::KernelType::kCuda) {
    return invalid_argument("the native CUDA worker runs only jobs whose kernels are all 'cuda'",
                            "reference.kernel_type");
  }
  return job;
}

}  // namespace kforge::cuda_worker
