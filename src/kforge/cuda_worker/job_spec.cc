#include "kforge/cuda_worker/job_spec.h"

#include "kforge/model/parse.h"

namespace kforge::cuda_worker {

StatusOr<NativeJob> parse_native_job(const Json& spec) {
  if (!spec.is_object()) return invalid_argument("the job spec must be an object");
  NativeJob job;
  job.job_id = spec.value("job_id", "");
  job.device = spec.value("device", "");
  job.scratch_dir = spec.value("scratch_dir", "");
  job.cache_dir = spec.value("cache_dir", "");
  job.device_metrics = spec.value("device_metrics", Json());
  if (!job.device_metrics.is_null() &&
      (!job.device_metrics.is_object() || !job.device_metrics.value("ncu", Json()).is_string() ||
       !job.device_metrics.value("sections", Json()).is_array())) {
    return invalid_argument("must be {ncu, sections, timeout_s} or null", "device_metrics");
  }
  // The spec carries the fields of an /evaluate body; parse it as one, so every rule of
  // the REST API (cuda launch dimensions, compile options, ...) holds here too.
  Json body = Json::object();
  for (const char* key :
       {"kernel", "num_correct_trials", "measure_performance", "timing", "atol", "rtol", "seed"}) {
    if (spec.contains(key)) body[key] = spec[key];
  }
  if (spec.contains("reference") && !spec["reference"].is_null()) {
    body["reference_kernel"] = spec["reference"];
  }
  model::RequestLimits limits;
  limits.max_timeout_s = 1e9;
  KF_ASSIGN_OR_RETURN(job.request, model::parse_evaluate_request(body, limits));
  if (job.request.kernel.kernel_type != model::KernelType::kCuda ||
      (job.request.reference && job.request.reference->kernel_type != model::KernelType::kCuda)) {
    return invalid_argument("the native CUDA worker runs only jobs whose kernels are all 'cuda'",
                            "kernel.kernel_type");
  }
  return job;
}

}  // namespace kforge::cuda_worker
