#include "kforge/cuda/cuda_device.h"

#include <utility>

namespace kforge::cuda {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : api_(std::move(o.api_)), ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    this->~DeviceBuffer();
    api_ = std::move(o.api_);
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != 0 && api_) api_->cuMemFree(ptr_);
  ptr_ = 0;
}

Status DeviceBuffer::upload(std::span<const std::byte> host) {
  if (host.size() > bytes_) return internal_error("upload larger than the device buffer");
  if (host.empty()) return Status::ok();
  return api_->check(api_->cuMemcpyHtoD(ptr_, host.data(), host.size()), "cuMemcpyHtoD");
}

Status DeviceBuffer::download(std::span<std::byte> host) const {
  if (host.size() > bytes_) return internal_error("download larger than the device buffer");
  if (host.empty()) return Status::ok();
  return api_->check(api_->cuMemcpyDtoH(host.data(), ptr_, host.size()), "cuMemcpyDtoH");
}

StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::open(std::shared_ptr<const DriverApi> api,
                                                       int ordinal) {
  const DriverApi& d = *api;
  CUdevice device = 0;
  KF_RETURN_IF_CUDA_DRIVER_ERR(d, d.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  std::unique_ptr<CudaDevice> dev(new CudaDevice(api, device));
  KF_ASSIGN_OR_RETURN(dev->info_, query_gpu(d, ordinal));
  KF_RETURN_IF_CUDA_DRIVER_ERR(d, d.cuDevicePrimaryCtxRetain(&dev->context_, device),
                               "cuDevicePrimaryCtxRetain");
  KF_RETURN_IF_CUDA_DRIVER_ERR(d, d.cuCtxSetCurrent(dev->context_), "cuCtxSetCurrent");
  KF_RETURN_IF_CUDA_DRIVER_ERR(d, d.cuStreamCreate(&dev->stream_, CU_STREAM_NON_BLOCKING),
                               "cuStreamCreate");
  return dev;
}

CudaDevice::~CudaDevice() {
  if (stream_ != nullptr) api_->cuStreamDestroy(stream_);
  if (context_ != nullptr) api_->cuDevicePrimaryCtxRelease(device_);
}

StatusOr<DeviceBuffer> CudaDevice::alloc(size_t bytes) {
  CUdeviceptr ptr = 0;
  size_t size = std::max<size_t>(bytes, 1);
  KF_RETURN_IF_CUDA_DRIVER_ERR(*api_, api_->cuMemAlloc(&ptr, size), "cuMemAlloc");
  return DeviceBuffer(api_, ptr, size);
}

Status CudaDevice::synchronize(const char* what) {
  return api_->check(api_->cuCtxSynchronize(), what);
}

}  // namespace kforge::cuda
