// libkforge_cuda.so: the C ABI of kforge_cuda.h over the native backend.
#include "kforge/cuda/abi/kforge_cuda.h"

#include <exception>
#include <memory>
#include <string>

#include "kforge/common/json.h"
#include "kforge/cuda/compile_request.h"
#include "kforge/cuda/device_inventory.h"
#include "kforge/cuda/driver_api.h"
#include "kforge/cuda/kernel_args.h"
#include "kforge/cuda/loaded_kernel.h"
#include "kforge/cuda/nvrtc_compiler.h"
#include "kforge/model/parse.h"

struct kforge_cuda_kernel {
  std::shared_ptr<const kforge::cuda::DriverApi> api;
  std::unique_ptr<kforge::cuda::LoadedKernel> loaded;
  kforge::model::IOContract io;
  std::string info;
  size_t tensor_count = 0;
  CUdevice retained_device = -1;  // primary context retained by us (released on destroy)
};

namespace {

using kforge::ErrorCode;
using kforge::Json;
using kforge::Status;
using kforge::StatusOr;
namespace cuda = kforge::cuda;

thread_local std::string g_last_error;  // NOLINT: per-thread error text of the C ABI

int fail(int code, std::string message) {
  g_last_error = std::move(message);
  return code;
}

int fail_status(const Status& s, int code_for_internal) {
  int code = code_for_internal;
  if (s.code() == ErrorCode::kInvalidArgument) code = KFORGE_CUDA_ERROR_INVALID_ARGUMENT;
  return fail(code, s.to_string());
}

// The device the current context belongs to, retaining device 0's primary context when no
// context is current. `retained` is set when we retained one.
StatusOr<cuda::GpuInfo> current_gpu(const cuda::DriverApi& api, CUdevice& retained) {
  CUcontext ctx = nullptr;
  KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (ctx == nullptr) {
    int count = 0;
    KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (count == 0) return kforge::unavailable("no CUDA device visible");
    CUdevice dev = 0;
    KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuDeviceGet(&dev, 0), "cuDeviceGet");
    KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuDevicePrimaryCtxRetain(&ctx, dev),
                                 "cuDevicePrimaryCtxRetain");
    retained = dev;
    KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  }
  CUdevice dev = 0;
  KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  // The driver ordinal of `dev`: devices are numbered 0..count-1 and CUdevice is the ordinal.
  return cuda::query_gpu(api, static_cast<int>(dev));
}

int create(const char* request_json, kforge_cuda_kernel** out) {
  if (request_json == nullptr || out == nullptr) {
    return fail(KFORGE_CUDA_ERROR_INVALID_ARGUMENT, "null argument");
  }
  *out = nullptr;
  auto request = kforge::parse_json(request_json);
  if (!request.is_ok() || !request->is_object()) {
    return fail(KFORGE_CUDA_ERROR_INVALID_ARGUMENT, "the request must be a JSON object");
  }
  kforge::model::JobRequest job;
  auto kernel = kforge::model::parse_kernel_code(*request, kforge::JsonPath("kernel"), {});
  if (!kernel.is_ok()) return fail_status(kernel.status(), KFORGE_CUDA_ERROR_INTERNAL);
  job.kernel = std::move(kernel).value();
  if (job.kernel.kernel_type != kforge::model::KernelType::kCuda) {
    return fail(KFORGE_CUDA_ERROR_INVALID_ARGUMENT, "kernel.kernel_type: must be 'cuda'");
  }
  if (Status s = kforge::model::check_request_consistency(job, "kernel", "reference"); !s) {
    return fail_status(s, KFORGE_CUDA_ERROR_INTERNAL);
  }

  auto handle = std::make_unique<kforge_cuda_kernel>();
  std::string arch = request->value("arch", "");
  std::string no_device;
  auto api = cuda::DriverApi::load();
  if (api.is_ok()) {
    auto gpu = current_gpu(**api, handle->retained_device);
    if (gpu.is_ok()) {
      handle->api = *api;
      if (arch.empty()) arch = gpu->arch();
    } else {
      no_device = gpu.status().message();
    }
  } else {
    no_device = api.status().message();
  }
  if (arch.empty()) arch = "sm_90a";  // what this service targets, for compile checks

  cuda::NvrtcApi::Options nvrtc_options;
  nvrtc_options.library_path = request->value("nvrtc_library", "");
  auto nvrtc = cuda::NvrtcApi::load(nvrtc_options);
  if (!nvrtc.is_ok()) return fail(KFORGE_CUDA_ERROR_NVRTC_UNAVAILABLE, nvrtc.status().message());
  auto compiler = cuda::NvrtcCompiler::create({*nvrtc, request->value("cache_dir", "")});
  if (!compiler.is_ok()) return fail_status(compiler.status(), KFORGE_CUDA_ERROR_INTERNAL);
  auto compile_request = cuda::make_compile_request(job.kernel, arch, "kernel");
  if (!compile_request.is_ok())
    return fail_status(compile_request.status(), KFORGE_CUDA_ERROR_INTERNAL);
  auto compiled = (*compiler)->compile(*compile_request);
  if (!compiled.is_ok()) {
    const Status& s = compiled.status();
    if (s.code() == ErrorCode::kInvalidArgument)
      return fail(KFORGE_CUDA_ERROR_COMPILE, s.message());
    if (s.code() == ErrorCode::kUnavailable) {
      return fail(KFORGE_CUDA_ERROR_NVRTC_UNAVAILABLE, s.message());
    }
    return fail(KFORGE_CUDA_ERROR_INTERNAL, s.message());
  }
  Json info = {{"arch", arch},
               {"format", compiled->kernel.format},
               {"cache", compiled->cache_hit ? "hit" : "miss"},
               {"compile_ms", compiled->compile_ms},
               {"log", compiled->kernel.log},
               {"options", compile_request->options},
               {"nvrtc_version", (*nvrtc)->version()},
               {"nvrtc_library", (*nvrtc)->library_path()},
               {"lowered_name", compiled->kernel.lowered_name}};
  if (!handle->api) {
    return fail(KFORGE_CUDA_ERROR_NO_DEVICE, "no CUDA device on this server (" + no_device +
                                                 "); the kernel compiled for " + arch +
                                                 " with NVRTC " + (*nvrtc)->version() +
                                                 ", but kernel_type 'cuda' runs only on a GPU");
  }
  const unsigned smem = static_cast<unsigned>(job.kernel.io->launch->shared_mem_bytes.value_or(0));
  auto loaded = cuda::LoadedKernel::load(handle->api, compiled->kernel, smem);
  if (!loaded.is_ok()) return fail(KFORGE_CUDA_ERROR_CUDA, loaded.status().message());
  handle->loaded = std::move(loaded).value();
  info["attributes"] = handle->loaded->attributes();
  handle->io = *job.kernel.io;
  // Marshal once with placeholder pointers, so a contract that does not fit the kernel's
  // parameters fails here rather than at the first launch.
  for (const auto& a : handle->io.args) {
    if (a.type == kforge::model::ArgType::kTensor) ++handle->tensor_count;
  }
  std::vector<uint64_t> placeholders(handle->tensor_count, 0);
  auto args = cuda::marshal_kernel_args(handle->io, placeholders, handle->loaded->param_sizes());
  if (!args.is_ok()) return fail_status(args.status(), KFORGE_CUDA_ERROR_INTERNAL);
  Json params = Json::array();
  for (const auto& p : args->described()) {
    params.push_back({{"name", p.name}, {"c_type", p.c_type}, {"size", p.size}});
  }
  info["params"] = params;
  handle->info = info.dump();
  *out = handle.release();
  return KFORGE_CUDA_OK;
}

}  // namespace

extern "C" {

int kforge_cuda_abi_version(void) {
  return KFORGE_CUDA_ABI_VERSION;
}

int kforge_cuda_kernel_create(const char* request_json, kforge_cuda_kernel** out) {
  try {
    g_last_error.clear();
    return create(request_json, out);
  } catch (const std::exception& e) {
    return fail(KFORGE_CUDA_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  }
}

const char* kforge_cuda_kernel_info(const kforge_cuda_kernel* kernel) {
  return kernel != nullptr ? kernel->info.c_str() : "";
}

int kforge_cuda_kernel_launch(kforge_cuda_kernel* kernel, const uint64_t* tensor_ptrs,
                              size_t n_tensors, void* stream) {
  try {
    if (kernel == nullptr || (tensor_ptrs == nullptr && n_tensors > 0)) {
      return fail(KFORGE_CUDA_ERROR_INVALID_ARGUMENT, "null argument");
    }
    if (n_tensors != kernel->tensor_count) {
      return fail(KFORGE_CUDA_ERROR_INVALID_ARGUMENT,
                  "the IOContract has " + std::to_string(kernel->tensor_count) +
                      " tensor arguments, got " + std::to_string(n_tensors) + " pointers");
    }
    Status s =
        cuda::launch_with_contract(*kernel->loaded, kernel->io, {tensor_ptrs, n_tensors},
                                   kernel->loaded->param_sizes(), static_cast<CUstream>(stream));
    if (!s) return fail_status(s, KFORGE_CUDA_ERROR_CUDA);
    return KFORGE_CUDA_OK;
  } catch (const std::exception& e) {
    return fail(KFORGE_CUDA_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  }
}

void kforge_cuda_kernel_destroy(kforge_cuda_kernel* kernel) {
  if (kernel == nullptr) return;
  kernel->loaded.reset();
  if (kernel->retained_device >= 0 && kernel->api) {
    kernel->api->cuDevicePrimaryCtxRelease(kernel->retained_device);
  }
  delete kernel;
}

const char* kforge_cuda_last_error(void) {
  return g_last_error.c_str();
}

}  // extern "C"
