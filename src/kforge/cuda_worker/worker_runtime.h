// What a native CUDA worker process sets up before it says `ready`: NVRTC loaded and warm
// (one small kernel compiled), and on a GPU the device's context current, a stream, the L2
// flush buffer and events (GpuTimer), and one kernel launched. A job then pays none of it.
//
// On the cpu device (a server without a usable GPU) only NVRTC is set up: `cuda` jobs
// compile, then fail with `no_device_reason`.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/cuda/cuda_device.h"
#include "kforge/cuda/gpu_timer.h"
#include "kforge/cuda/nvrtc_api.h"

namespace kforge::cuda_worker {

struct WorkerRuntimeOptions {
  std::string device = "cpu";  // "cpu" | "cuda:N" (the server's name for the device)
  std::string arch;            // compile target without a GPU ("" = sm_90a)
  std::string why_no_gpu;      // the server's reason when it has no GPU at all
  // A replay under a profiler (`--replay`): no timer (its kernels would be profiled too)
  // and no warm-up launch.
  bool profile_target = false;
};

// The N of a device named "cuda:N" (the server's numbering), or -1 for any other name.
int cuda_device_number(std::string_view device);

class WorkerRuntime {
 public:
  // Never fails: a step that fails is recorded in warmup_errors(), and a job that needs it
  // fails with that reason.
  static std::unique_ptr<WorkerRuntime> start(const WorkerRuntimeOptions& options);

  const WorkerRuntimeOptions& options() const { return options_; }
  // Null when NVRTC could not be loaded (nvrtc_error() says why).
  const std::shared_ptr<const cuda::NvrtcApi>& nvrtc() const { return nvrtc_; }
  const std::string& nvrtc_error() const { return nvrtc_error_; }
  // Null on the cpu device or when the GPU could not be opened (no_device_reason()).
  cuda::CudaDevice* device() const { return device_.get(); }
  cuda::GpuTimer* timer() const { return timer_.get(); }
  const std::string& no_device_reason() const { return no_device_reason_; }
  // The architecture kernels are compiled for: the GPU's, else options.arch or sm_90a.
  std::string arch() const;

  // The `device` object of `ready` and the warm-up facts.
  Json describe_device() const;
  const Json& warmup_steps_ms() const { return steps_ms_; }
  const Json& warmup_errors() const { return errors_; }

 private:
  explicit WorkerRuntime(WorkerRuntimeOptions options) : options_(std::move(options)) {}
  void open_gpu(int physical_index);
  void warm_nvrtc_and_launch();

  WorkerRuntimeOptions options_;
  std::shared_ptr<const cuda::NvrtcApi> nvrtc_;
  std::string nvrtc_error_;
  std::unique_ptr<cuda::CudaDevice> device_;
  std::unique_ptr<cuda::GpuTimer> timer_;
  std::string no_device_reason_;
  int physical_index_ = -1;
  Json steps_ms_ = Json::object();
  Json errors_ = Json::object();
};

}  // namespace kforge::cuda_worker
