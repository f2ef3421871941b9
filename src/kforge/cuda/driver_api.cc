#include "kforge/cuda/driver_api.h"

#include <dlfcn.h>

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
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return unavailable(std::string("no NVIDIA driver on this host: ") +
                       (err != nullptr ? err : "libcuda.so.1 not found"));
  }
  std::shared_ptr<DriverApi> api(new DriverApi());
  api->handle_ = handle;
#define KF_RESOLVE(name) KF_RETURN_IF_ERROR(resolve(handle, KF_CUDA_SYMBOL(name), api->name))
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
#undef KF_RESOLVE
  KF_RETURN_IF_ERROR(api->check(api->cuInit(0), "cuInit"));
  return std::shared_ptr<const DriverApi>(std::move(api));
}

Status DriverApi::check(CUresult result, const char* what) const {
  if (result == CUDA_SUCCESS) return Status::ok();
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName != nullptr) cuGetErrorName(result, &name);
  if (cuGetErrorString != nullptr) cuGetErrorString(result, &text);
  std::string message = std::string(what) + ": " + (name != nullptr ? name : "CUDA error") + " (" +
                        std::to_string(static_cast<int>(result)) + ")";
  if (text != nullptr) message += ": " + std::string(text);
  ErrorCode code = (result == CUDA_ERROR_NO_DEVICE || result == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH ||
                    result == CUDA_ERROR_NOT_INITIALIZED)
                       ? ErrorCode::kUnavailable
                       : ErrorCode::kInternal;
  return {code, std::move(message)};
}

}  // namespace kforge::cuda
