#include "kforge/cuda/loaded_kernel.h"

namespace kforge::cuda {
namespace {

constexpr unsigned kDefaultSharedLimit = 48 * 1024;
constexpr size_t kMaxParams = 4096;

ParamSizes query_param_sizes(const DriverApi& api, CUfunction f) {
  if (api.cuFuncGetParamInfo == nullptr) return std::nullopt;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < kMaxParams; ++i) {
    size_t offset = 0;
    size_t size = 0;
    CUresult r = api.cuFuncGetParamInfo(f, i, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) return sizes;  // past the last parameter
    if (r != CUDA_SUCCESS) return std::nullopt;
    sizes.push_back(size);
  }
  return std::nullopt;
}

}  // namespace

StatusOr<std::unique_ptr<LoadedKernel>> LoadedKernel::load(std::shared_ptr<const DriverApi> api,
                                                           const CompiledKernel& kernel,
                                                           unsigned dynamic_shared_mem_bytes) {
  const DriverApi& d = *api;
  CUmodule module = nullptr;
  KF_RETURN_IF_CUDA_DRIVER_ERR(d, d.cuModuleLoadData(&module, kernel.image.data()),
                               "cuModuleLoadData (loading the compiled kernel)");
  std::unique_ptr<LoadedKernel> loaded(new LoadedKernel(std::move(api), module));
  KF_RETURN_IF_CUDA_DRIVER_ERR(
      d, d.cuModuleGetFunction(&loaded->function_, module, kernel.lowered_name.c_str()),
      "cuModuleGetFunction");
  if (dynamic_shared_mem_bytes > kDefaultSharedLimit) {
    KF_RETURN_IF_CUDA_DRIVER_ERR(
        d,
        d.cuFuncSetAttribute(loaded->function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             static_cast<int>(dynamic_shared_mem_bytes)),
        "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) for io.launch.shared_mem_bytes");
  }
  loaded->param_sizes_ = query_param_sizes(d, loaded->function_);
  return loaded;
}

LoadedKernel::~LoadedKernel() {
  if (module_ != nullptr) api_->cuModuleUnload(module_);
}

Status LoadedKernel::launch(const LaunchDims& dims, void** params, CUstream stream) {
  return api_->check(api_->cuLaunchKernel(function_, dims.grid[0], dims.grid[1], dims.grid[2],
                                          dims.block[0], dims.block[1], dims.block[2],
                                          dims.shared_mem_bytes, stream, params, nullptr),
                     "cuLaunchKernel");
}

Json LoadedKernel::attributes() const {
  Json out = Json::object();
  auto attr = [&](CUfunction_attribute a, const char* name) {
    int v = 0;
    if (api_->cuFuncGetAttribute(&v, a, function_) == CUDA_SUCCESS) out[name] = v;
  };
  attr(CU_FUNC_ATTRIBUTE_NUM_REGS, "registers_per_thread");
  attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "static_shared_bytes");
  attr(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "local_bytes_per_thread");
  attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max_threads_per_block");
  return out;
}

}  // namespace kforge::cuda
