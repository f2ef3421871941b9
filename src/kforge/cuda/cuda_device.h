// One GPU as the native worker uses it: the device's primary context made current on the
// calling thread, a stream for the job, facts about the device, and device memory.
//
// Thread-safety: use from the thread that opened it.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <span>

#include "kforge/common/status.h"
#include "kforge/cuda/device_inventory.h"
#include "kforge/cuda/driver_api.h"

namespace kforge::cuda {

// Device memory, freed on destruction (errors at free time are ignored: after a kernel
// fault the context is gone anyway).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::shared_ptr<const DriverApi> api, CUdeviceptr ptr, size_t bytes)
      : api_(std::move(api)), ptr_(ptr), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  // Synchronous copies of exactly bytes() (or fewer) bytes.
  Status upload(std::span<const std::byte> host);
  Status download(std::span<std::byte> host) const;

 private:
  std::shared_ptr<const DriverApi> api_;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

class CudaDevice {
 public:
  // Retains the primary context of driver ordinal `ordinal`, makes it current on this
  // thread and creates a non-blocking stream.
  static StatusOr<std::unique_ptr<CudaDevice>> open(std::shared_ptr<const DriverApi> api,
                                                    int ordinal);
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  const GpuInfo& info() const { return info_; }
  CUstream stream() const { return stream_; }
  const DriverApi& api() const { return *api_; }
  const std::shared_ptr<const DriverApi>& api_ptr() const { return api_; }

  // At least one byte is allocated, so a tensor with no elements still has an address.
  StatusOr<DeviceBuffer> alloc(size_t bytes);
  // cuCtxSynchronize: where asynchronous kernel faults are reported.
  Status synchronize(const char* what);

 private:
  CudaDevice(std::shared_ptr<const DriverApi> api, CUdevice device)
      : api_(std::move(api)), device_(device) {}

  std::shared_ptr<const DriverApi> api_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  GpuInfo info_;
};

}  // namespace kforge::cuda
