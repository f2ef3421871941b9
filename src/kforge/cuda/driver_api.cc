#include "kforge/cuda/driver_api.h"

#include <dlfcn.h>

#include <optional>

#include "kforge/common/thread_annotations.h"

namespace kforge::cuda {
namespace {

// Stringifies after macro expansion, so KF_CUDA_SYMBOL(cuDeviceTotalMem) is
// "cuDeviceTotalMem_v2": the symbol cuda.h's declaration refers to.
#define KF_CUDA_STR(x) #x
#define KF_CUDA_SYMBOL(x) KF_CUDA_STR(x)

template <typename Fn>
Status resolve(void* handle, const char* symbol, Fn& out) {
  void* p = dlsym(handle, symbol);
  if (p == nullptr) {
    return unavailable(std::string("libcuda.so.1 lacks ") + symbol + " (driver too old?)");
  }
  out = reinterpret_cast<Fn>(p);
  return Status::ok();
}

}  // namespace

StatusOr<std::shared_ptr<const DriverApi>> DriverApi::load() {
  static Mutex mu;
  static std::optional<StatusOr<std::shared_ptr<const DriverApi>>> loaded GUARDED_BY(mu);
  MutexLock lock(mu);
  if (!loaded) loaded.emplace(load_uncached());
  return *loaded;
}

StatusOr<std::shared_ptr<const DriverApi>> DriverApi::load_uncached() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return unavailable(std::string("no NVIDIA driver on this host: ") +
                       (err != nullptr ? err : "libcuda.so.1 not found"));
  }
  std::shared_ptr<DriverApi> api(new DriverApi());
  api->handle_ = handle;
#define KF_RESOLVE(name) KF_RETURN_IF_ERROR(resolve(handle, KF_CUDA_SYMBOL(name), api->name))
#define KF_RESOLVE_OPTIONAL(name) \
  api->name = reinterpret_cast<decltype(api->name)>(dlsym(handle, KF_CUDA_SYMBOL(name)))
  KF_RESOLVE(cuInit);
  KF_RESOLVE(cuDriverGetVersion);
  KF_RESOLVE(cuDeviceGetCount);
  KF_RESOLVE(cuDeviceGet);
  KF_RESOLVE(cuDeviceGetName);
  KF_RESOLVE(cuDeviceGetAttribute);
  KF_RESOLVE(cuDeviceTotalMem);
  KF_RESOLVE(cuDeviceGetUuid);
  KF_RESOLVE(cuGetErrorName);
  KF_RESOLVE(cuGetErrorString);
  KF_RESOLVE(cuDevicePrimaryCtxRetain);
  KF_RESOLVE(cuDevicePrimaryCtxRelease);
  KF_RESOLVE(cuCtxSetCurrent);
  KF_RESOLVE(cuCtxGetCurrent);
  KF_RESOLVE(cuCtxGetDevice);
  KF_RESOLVE(cuCtxSynchronize);
  KF_RESOLVE_OPTIONAL(cuCtxResetPersistingL2Cache);
  KF_RESOLVE(cuMemGetInfo);
  KF_RESOLVE(cuMemAlloc);
  KF_RESOLVE(cuMemFree);
  KF_RESOLVE(cuMemcpyHtoD);
  KF_RESOLVE(cuMemcpyDtoH);
  KF_RESOLVE(cuMemsetD8Async);
  KF_RESOLVE(cuModuleLoadData);
  KF_RESOLVE(cuModuleUnload);
  KF_RESOLVE(cuModuleGetFunction);
  KF_RESOLVE(cuFuncSetAttribute);
  KF_RESOLVE(cuFuncGetAttribute);
  KF_RESOLVE_OPTIONAL(cuFuncGetParamInfo);
  KF_RESOLVE(cuLaunchKernel);
  KF_RESOLVE(cuStreamCreate);
  KF_RESOLVE(cuStreamDestroy);
  KF_RESOLVE(cuStreamSynchronize);
  KF_RESOLVE(cuStreamBeginCapture);
  KF_RESOLVE(cuStreamEndCapture);
  KF_RESOLVE(cuGraphInstantiate);
  KF_RESOLVE(cuGraphLaunch);
  KF_RESOLVE(cuGraphExecDestroy);
  KF_RESOLVE(cuGraphDestroy);
  KF_RESOLVE(cuEventCreate);
  KF_RESOLVE(cuEventDestroy);
  KF_RESOLVE(cuEventRecord);
  KF_RESOLVE(cuEventSynchronize);
  KF_RESOLVE(cuEventQuery);
  KF_RESOLVE_OPTIONAL(cuEventElapsedTime);
  if (api->cuEventElapsedTime == nullptr) {
    // Drivers before 12.8 have only the original entry point (same signature).
    KF_RETURN_IF_ERROR(resolve(handle, "cuEventElapsedTime", api->cuEventElapsedTime));
  }
#undef KF_RESOLVE_OPTIONAL
#undef KF_RESOLVE
  KF_RETURN_IF_ERROR(api->check(api->cuInit(0), "cuInit"));
  return std::shared_ptr<const DriverApi>(std::move(api));
}

std::string DriverApi::error_name(CUresult result) const {
  const char* name = nullptr;
  if (cuGetErrorName != nullptr && cuGetErrorName(result, &name) == CUDA_SUCCESS &&
      name != nullptr) {
    return name;
  }
  return "CUresult " + std::to_string(static_cast<int>(result));
}

Status DriverApi::check(CUresult result, const char* what) const {
  if (result == CUDA_SUCCESS) return Status::ok();
  const char* text = nullptr;
  if (cuGetErrorString != nullptr) cuGetErrorString(result, &text);
  std::string message = std::string(what) + ": " + error_name(result) + " (" +
                        std::to_string(static_cast<int>(result)) + ")";
  if (text != nullptr) message += ": " + std::string(text);
  ErrorCode code = ErrorCode::kInternal;
  if (result == CUDA_ERROR_NO_DEVICE || result == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH ||
      result == CUDA_ERROR_NOT_INITIALIZED || result == CUDA_ERROR_INVALID_DEVICE ||
      result == CUDA_ERROR_DEVICE_UNAVAILABLE) {
    code = ErrorCode::kUnavailable;
  } else if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    code = ErrorCode::kResourceExhausted;
  }
  return {code, std::move(message)};
}

}  // namespace kforge::cuda
