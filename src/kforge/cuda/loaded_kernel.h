// A compiled kernel loaded into the current CUDA context: its module, its function, the
// parameter sizes the driver reports, and a KernelLauncher that calls cuLaunchKernel.
//
// Thread-safety: use from the thread whose context it was loaded into.
#pragma once

#include <cuda.h>

#include <memory>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/cuda/compiled_kernel.h"
#include "kforge/cuda/driver_api.h"
#include "kforge/cuda/kernel_args.h"
#include "kforge/cuda/kernel_launcher.h"

namespace kforge::cuda {

class LoadedKernel final : public KernelLauncher {
 public:
  // Loads the image (cuModuleLoadData) into the context current on this thread and finds
  // the kernel. `dynamic_shared_mem_bytes` above the 48 KiB default raises the kernel's
  // limit (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
  static StatusOr<std::unique_ptr<LoadedKernel>> load(std::shared_ptr<const DriverApi> api,
                                                      const CompiledKernel& kernel,
                                                      unsigned dynamic_shared_mem_bytes);
  ~LoadedKernel() override;
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;

  Status launch(const LaunchDims& dims, void** params, CUstream stream) override;

  CUfunction function() const { return function_; }
  // From cuFuncGetParamInfo; nullopt on drivers without it.
  const ParamSizes& param_sizes() const { return param_sizes_; }
  // Registers per thread and static shared memory, for result metadata.
  Json attributes() const;

 private:
  LoadedKernel(std::shared_ptr<const DriverApi> api, CUmodule module)
      : api_(std::move(api)), module_(module) {}

  std::shared_ptr<const DriverApi> api_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  ParamSizes param_sizes_;
};

}  // namespace kforge::cuda
