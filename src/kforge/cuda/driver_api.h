// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1").
//
// kforge is one binary that runs with or without a GPU: nothing links against libcuda.
// `DriverApi::load()` returns kUnavailable ("no NVIDIA driver on this host: ...") when the
// library is missing. Every CUresult is turned into a Status in exactly one place,
// `DriverApi::check` (and KF_RETURN_IF_CUDA_DRIVER_ERR, which calls it).
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
  // names to, e.g. cuDeviceTotalMem_v2), then calls cuInit(0). The process-wide table is
  // loaded once and shared.
  static StatusOr<std::shared_ptr<const DriverApi>> load();

  // OK for CUDA_SUCCESS, else "<what>: CUDA_ERROR_X (code): description" with kUnavailable
  // for a missing device or driver, kResourceExhausted for out-of-memory, kInternal
  // otherwise (a kernel fault such as CUDA_ERROR_ILLEGAL_ADDRESS included).
  Status check(CUresult result, const char* what) const;

  // "CUDA_ERROR_ILLEGAL_ADDRESS" (or "CUresult <n>").
  std::string error_name(CUresult result) const;

  // Device inventory.
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

  // Contexts.
  decltype(&::cuDevicePrimaryCtxRetain) cuDevicePrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) cuDevicePrimaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) cuCtxSetCurrent = nullptr;
  decltype(&::cuCtxGetCurrent) cuCtxGetCurrent = nullptr;
  decltype(&::cuCtxGetDevice) cuCtxGetDevice = nullptr;
  decltype(&::cuCtxSynchronize) cuCtxSynchronize = nullptr;
  decltype(&::cuCtxResetPersistingL2Cache) cuCtxResetPersistingL2Cache = nullptr;  // optional

  // Memory.
  decltype(&::cuMemGetInfo) cuMemGetInfo = nullptr;
  decltype(&::cuMemAlloc) cuMemAlloc = nullptr;
  decltype(&::cuMemFree) cuMemFree = nullptr;
  decltype(&::cuMemcpyHtoD) cuMemcpyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH) cuMemcpyDtoH = nullptr;
  decltype(&::cuMemsetD8Async) cuMemsetD8Async = nullptr;

  // Modules and launches.
  decltype(&::cuModuleLoadData) cuModuleLoadData = nullptr;
  decltype(&::cuModuleUnload) cuModuleUnload = nullptr;
  decltype(&::cuModuleGetFunction) cuModuleGetFunction = nullptr;
  decltype(&::cuFuncSetAttribute) cuFuncSetAttribute = nullptr;
  decltype(&::cuFuncGetAttribute) cuFuncGetAttribute = nullptr;
  decltype(&::cuFuncGetParamInfo) cuFuncGetParamInfo = nullptr;  // optional (driver >= 12.4)
  decltype(&::cuLaunchKernel) cuLaunchKernel = nullptr;

  // Streams, events, graphs.
  decltype(&::cuStreamCreate) cuStreamCreate = nullptr;
  decltype(&::cuStreamDestroy) cuStreamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) cuStreamSynchronize = nullptr;
  decltype(&::cuStreamBeginCapture) cuStreamBeginCapture = nullptr;
  decltype(&::cuStreamEndCapture) cuStreamEndCapture = nullptr;
  decltype(&::cuGraphInstantiate) cuGraphInstantiate = nullptr;
  decltype(&::cuGraphLaunch) cuGraphLaunch = nullptr;
  decltype(&::cuGraphExecDestroy) cuGraphExecDestroy = nullptr;
  decltype(&::cuGraphDestroy) cuGraphDestroy = nullptr;
  decltype(&::cuEventCreate) cuEventCreate = nullptr;
  decltype(&::cuEventDestroy) cuEventDestroy = nullptr;
  decltype(&::cuEventRecord) cuEventRecord = nullptr;
  decltype(&::cuEventSynchronize) cuEventSynchronize = nullptr;
  decltype(&::cuEventQuery) cuEventQuery = nullptr;
  decltype(&::cuEventElapsedTime) cuEventElapsedTime = nullptr;

 private:
  DriverApi() = default;
  static StatusOr<std::shared_ptr<const DriverApi>> load_uncached();
  void* handle_ = nullptr;  // never closed: the driver stays loaded for the process lifetime
};

}  // namespace kforge::cuda

// Returns the Status of a failed driver call from the enclosing function:
//   KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuMemAlloc(&ptr, bytes), "cuMemAlloc");
#define KF_RETURN_IF_CUDA_DRIVER_ERR(api, call, what) \
  KF_RETURN_IF_ERROR((api).check((call), (what)))
