// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1").
//
// kforge is one binary that runs with or without a GPU: nothing links against libcuda.
// `DriverApi::load()` returns kUnavailable ("no NVIDIA driver on this host: ...") when the
// library is missing. Every CUresult is turned into a Status in exactly one place,
// `DriverApi::check`.
//
// Thread-safety: the loaded table is immutable after load() and safe to share.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "kforge/common/status.h"

namespace kforge::cuda {

class DriverApi {
 public:
  // Loads libcuda.so.1 and resolves the entry points (the versioned symbols cuda.h maps
  // names to, e.g. cuDeviceTotalMem_v2), then calls cuInit(0).
  static StatusOr<std::shared_ptr<const DriverApi>> load();

  // OK for CUDA_SUCCESS, else kInternal/kUnavailable "<what>: CUDA_ERROR_X (description)".
  Status check(CUresult result, const char* what) const;

  decltype(&::cuInit) cuInit = nullptr;
  decltype(&::cuDriverGetVersion) cuDriverGetVersion = nullptr;
  decltype(&::cuDeviceGetCount) cuDeviceGetCount = nullptr;
  decltype(&::cuDeviceGet) cuDeviceGet = nullptr;
  decltype(&::cuDeviceGetName) cuDeviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) cuDeviceGetAttribute = nullptr;
  decltype(&::cuDeviceTotalMem) cuDeviceTotalMem = nullptr;
  decltype(&::cuDeviceGetUuid) cuDeviceGetUuid = nullptr;
  decltype(&::cuGetErrorName) cuGetErrorName = nullptr;
  decltype(&::cuGetErrorString) cuGetErrorString = nullptr;

 private:
  DriverApi() = default;
  void* handle_ = nullptr;  // never closed: the driver stays loaded for the process lifetime
};

}  // namespace kforge::cuda
