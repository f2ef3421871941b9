#include "kforge/cuda_worker/job_kernel.h"

namespace kforge::cuda_worker {

std::vector<size_t> JobKernel::written_positions() const {
  std::vector<size_t> out;
  size_t pos = 0;
  for (const auto& a : io().args) {
    if (a.type != model::ArgType::kTensor) continue;
    if (a.role != model::ArgRole::kInput) out.push_back(pos);
    ++pos;
  }
  return out;
}

std::vector<size_t> JobKernel::input_positions() const {
  std::vector<size_t> out;
  size_t pos = 0;
  for (const auto& a : io().args) {
    if (a.type != model::ArgType::kTensor) continue;
    if (a.role == model::ArgRole::kInput) out.push_back(pos);
    ++pos;
  }
  return out;
}

std::vector<std::string> JobKernel::tensor_names() const {
  std::vector<std::string> out;
  for (const auto& a : io().args) {
    if (a.type == model::ArgType::kTensor) out.push_back(a.name);
  }
  return out;
}

StatusOr<BoundLaunch> BoundLaunch::bind(cuda::CudaDevice& device, JobKernel& kernel,
                                        const std::vector<cuda::HostTensor>& tensors) {
  BoundLaunch b;
  b.kernel_ = &kernel;
  std::vector<uint64_t> ptrs;
  for (const auto& t : tensors) {
    KF_ASSIGN_OR_RETURN(cuda::DeviceBuffer buf, device.alloc(t.bytes.size()));
    KF_RETURN_IF_ERROR(buf.upload(t.bytes));
    ptrs.push_back(buf.ptr());
    b.buffers_.push_back(std::move(buf));
  }
  // A copy from pageable host memory may return before its DMA has landed, and kernels run on
  // a non-blocking stream that does not wait for it: without this, a late poison upload
  // overwrote part of what the kernel had written (a matmul's "second run disagrees" with NaN
  // in 832 of 16384 elements, on an H200).
  KF_RETURN_IF_ERROR(device.synchronize("copying the kernel's inputs to the device"));
  KF_ASSIGN_OR_RETURN(b.dims_, cuda::launch_dims(kernel.io()));
  KF_ASSIGN_OR_RETURN(b.args_,
                      cuda::marshal_kernel_args(kernel.io(), ptrs, kernel.loaded->param_sizes()));
  return b;
}

Status BoundLaunch::launch(CUstream stream) {
  return kernel_->loaded->launch(dims_, args_.params(), stream);
}

StatusOr<std::vector<cuda::HostTensor>> BoundLaunch::download(
    const std::vector<cuda::HostTensor>& like) const {
  std::vector<cuda::HostTensor> out = like;
  for (size_t i = 0; i < out.size(); ++i) {
    KF_RETURN_IF_ERROR(buffers_[i].download(out[i].bytes));
  }
  return out;
}

StatusOr<std::vector<cuda::HostTensor>> run_once(cuda::CudaDevice& device, JobKernel& kernel,
                                                 const std::vector<cuda::HostTensor>& tensors) {
  KF_ASSIGN_OR_RETURN(BoundLaunch launch, BoundLaunch::bind(device, kernel, tensors));
  KF_RETURN_IF_ERROR(launch.launch(device.stream()));
  KF_RETURN_IF_ERROR(device.synchronize("the kernel failed"));
  return launch.download(tensors);
}

}  // namespace kforge::cuda_worker
