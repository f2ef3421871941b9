// A job's kernel compiled and loaded on the worker's GPU, and the launches made with it:
// device copies of its tensor arguments (declared order) plus its marshalled parameters.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/cuda/compiled_kernel.h"
#include "kforge/cuda/cuda_device.h"
#include "kforge/cuda/host_tensor.h"
#include "kforge/cuda/kernel_args.h"
#include "kforge/cuda/loaded_kernel.h"
#include "kforge/model/kernel_spec.h"

namespace kforge::cuda_worker {

struct JobKernel {
  std::string role;  // "candidate" | "reference"
  const model::KernelCode* code = nullptr;
  cuda::CompileResult compiled;
  std::unique_ptr<cuda::LoadedKernel> loaded;

  const model::IOContract& io() const { return *code->io; }
  // Positions, in its tensor-argument list, of the tensors it writes (output/inout).
  std::vector<size_t> written_positions() const;
  // Positions of its read-only (role input) tensors.
  std::vector<size_t> input_positions() const;
  // Names of its tensor arguments in declared order.
  std::vector<std::string> tensor_names() const;
};

// One kernel's arguments on the device, ready to launch any number of times.
class BoundLaunch {
 public:
  // Uploads `tensors` (the kernel's tensor arguments in declared order) and marshals the
  // parameters once.
  static StatusOr<BoundLaunch> bind(cuda::CudaDevice& device, JobKernel& kernel,
                                    const std::vector<cuda::HostTensor>& tensors);

  // Enqueues one launch on `stream`.
  Status launch(CUstream stream);
  // Copies every tensor back (synchronously; call after the launch finished).
  StatusOr<std::vector<cuda::HostTensor>> download(const std::vector<cuda::HostTensor>& like) const;

 private:
  BoundLaunch() = default;
  JobKernel* kernel_ = nullptr;
  std::vector<cuda::DeviceBuffer> buffers_;
  cuda::LaunchDims dims_;
  cuda::KernelArgs args_;
};

// Runs `kernel` once on copies of `tensors` to completion (the device synchronised, so a
// kernel fault is reported here) and returns the tensors' contents afterwards.
StatusOr<std::vector<cuda::HostTensor>> run_once(cuda::CudaDevice& device, JobKernel& kernel,
                                                 const std::vector<cuda::HostTensor>& tensors);

}  // namespace kforge::cuda_worker
