#include "kforge/cuda/nvrtc_compiler.h"

#include <chrono>

#include "kforge/common/log.h"
#include "kforge/cuda/include_policy.h"

namespace kforge::cuda {
namespace {

// Destroys the program on every path out of run_nvrtc.
class ProgramGuard {
 public:
  ProgramGuard(const NvrtcApi& api, nvrtcProgram program) : api_(api), program_(program) {}
  ~ProgramGuard() { api_.nvrtcDestroyProgram(&program_); }
  ProgramGuard(const ProgramGuard&) = delete;
  ProgramGuard& operator=(const ProgramGuard&) = delete;

 private:
  const NvrtcApi& api_;
  nvrtcProgram program_;
};

// NVRTC's message when the name expression names nothing, made to say which field is wrong.
std::string explain(const std::string& message, const std::string& kernel_name) {
  if (message.find("\"" + kernel_name + "\" is undefined") != std::string::npos) {
    return "metadata.kernel_name '" + kernel_name +
           "' is not defined in the source (it must name the __global__ function to launch)\n" +
           message;
  }
  return message;
}

}  // namespace

StatusOr<std::unique_ptr<NvrtcCompiler>> NvrtcCompiler::create(Options options) {
  if (!options.nvrtc) return invalid_argument("NvrtcCompiler needs a loaded NVRTC");
  std::unique_ptr<CompileCache> cache;
  if (!options.cache_dir.empty()) {
    KF_ASSIGN_OR_RETURN(cache, CompileCache::open({options.cache_dir}));
  }
  return std::unique_ptr<NvrtcCompiler>(new NvrtcCompiler(std::move(options), std::move(cache)));
}

StatusOr<CompileResult> NvrtcCompiler::compile(const CompileRequest& request) {
  if (request.kernel_name.empty()) return invalid_argument("no kernel name to compile");
  if (!request.arch.starts_with("sm_") && !request.arch.starts_with("compute_")) {
    return invalid_argument("bad architecture '" + request.arch +
                            "' (expected sm_XY or compute_XY)");
  }
  // Before the cache too: a source refused now is refused whatever an older kforge cached.
  KF_RETURN_IF_ERROR(check_includes(request.source, request.kernel_name + ".cu"));
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  CompileResult result;
  const NvrtcApi& api = *options_.nvrtc;
  result.cache_key = CompileCache::key_for(request, api.version(), api.include_dir());
  if (cache_) {
    if (auto hit = cache_->find(result.cache_key)) {
      result.kernel = std::move(*hit);
      result.cache_hit = true;
      result.compile_ms = elapsed_ms();
      return result;
    }
  }
  KF_ASSIGN_OR_RETURN(result.kernel, run_nvrtc(request));
  result.compile_ms = elapsed_ms();
  if (cache_) {
    if (Status s = cache_->put(result.cache_key, result.kernel); !s) {
      KF_LOG_WARN("could not write the CUDA compile cache: {}", s.message());
    }
  }
  return result;
}

StatusOr<CompiledKernel> NvrtcCompiler::run_nvrtc(const CompileRequest& request) const {
  const NvrtcApi& api = *options_.nvrtc;
  nvrtcProgram program = nullptr;
  const std::string file_name = request.kernel_name + ".cu";
  KF_RETURN_IF_ERROR(api.check(api.nvrtcCreateProgram(&program, request.source.c_str(),
                                                      file_name.c_str(), 0, nullptr, nullptr),
                               "nvrtcCreateProgram"));
  ProgramGuard guard(api, program);
  const std::string name_expression = "&" + request.kernel_name;
  KF_RETURN_IF_ERROR(api.check(api.nvrtcAddNameExpression(program, name_expression.c_str()),
                               "nvrtcAddNameExpression", program));

  std::vector<std::string> options = {"-arch=" + request.arch};
  if (!api.include_dir().empty()) options.push_back("-I" + api.include_dir());
  options.insert(options.end(), request.options.begin(), request.options.end());
  std::vector<const char*> argv;
  argv.reserve(options.size());
  for (const auto& o : options)
    argv.push_back(o.c_str());
  nvrtcResult compiled =
      api.nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  if (compiled != NVRTC_SUCCESS) {
    Status s =
        api.check(compiled, ("NVRTC compilation for " + request.arch + " failed").c_str(), program);
    return Status(s.code(), explain(s.message(), request.kernel_name));
  }

  CompiledKernel kernel;
  kernel.arch = request.arch;
  kernel.log = api.program_log(program);
  const char* lowered = nullptr;
  KF_RETURN_IF_ERROR(api.check(api.nvrtcGetLoweredName(program, name_expression.c_str(), &lowered),
                               "nvrtcGetLoweredName", program));
  if (lowered == nullptr) return internal_error("NVRTC gave no lowered name");
  kernel.lowered_name = lowered;
  size_t size = 0;
  if (request.arch.starts_with("sm_")) {
    kernel.format = "cubin";
    KF_RETURN_IF_ERROR(api.check(api.nvrtcGetCUBINSize(program, &size), "nvrtcGetCUBINSize"));
    kernel.image.resize(size);
    KF_RETURN_IF_ERROR(api.check(api.nvrtcGetCUBIN(program, kernel.image.data()), "nvrtcGetCUBIN"));
  } else {
    kernel.format = "ptx";
    KF_RETURN_IF_ERROR(api.check(api.nvrtcGetPTXSize(program, &size), "nvrtcGetPTXSize"));
    kernel.image.resize(size);  // includes the terminating NUL cuModuleLoadData needs
    KF_RETURN_IF_ERROR(api.check(api.nvrtcGetPTX(program, kernel.image.data()), "nvrtcGetPTX"));
  }
  return kernel;
}

}  // namespace kforge::cuda
