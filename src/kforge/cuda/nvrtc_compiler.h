// Compiles `cuda` kernels with NVRTC for one architecture, through the on-disk cache.
//
// A real architecture ("sm_90a") gives a cubin (no JIT at load time); a virtual one
// ("compute_90") gives PTX. The kernel is found by an NVRTC name expression
// (`&kernel_name`), so it need not be `extern "C"`. The CUDA headers are on the include
// path (NvrtcApi::include_dir); an #include of anything else but files beside the source is
// refused before NVRTC runs (include_policy.h). Errors in the source or options are
// kInvalidArgument whose message is NVRTC's log; a missing or broken NVRTC is kUnavailable.
//
// Thread-safety: one instance per thread.
//
// Example:
//   KF_ASSIGN_OR_RETURN(auto compiler, NvrtcCompiler::create({.nvrtc = api, .cache_dir = dir}));
//   KF_ASSIGN_OR_RETURN(CompileResult r, compiler->compile({src, "vector_add", {}, "sm_90a"}));
#pragma once

#include <filesystem>
#include <memory>

#include "kforge/common/status.h"
#include "kforge/cuda/compile_cache.h"
#include "kforge/cuda/compiled_kernel.h"
#include "kforge/cuda/nvrtc_api.h"

namespace kforge::cuda {

class NvrtcCompiler {
 public:
  struct Options {
    std::shared_ptr<const NvrtcApi> nvrtc;
    std::filesystem::path cache_dir;  // empty: no cache
  };
  static StatusOr<std::unique_ptr<NvrtcCompiler>> create(Options options);

  StatusOr<CompileResult> compile(const CompileRequest& request);

  const NvrtcApi& nvrtc() const { return *options_.nvrtc; }
  // nullptr when there is no cache.
  const CompileCache* cache() const { return cache_.get(); }

 private:
  NvrtcCompiler(Options options, std::unique_ptr<CompileCache> cache)
      : options_(std::move(options)), cache_(std::move(cache)) {}
  StatusOr<CompiledKernel> run_nvrtc(const CompileRequest& request) const;

  const Options options_;
  std::unique_ptr<CompileCache> cache_;
};

}  // namespace kforge::cuda
