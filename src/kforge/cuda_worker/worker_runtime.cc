#include "kforge/cuda_worker/worker_runtime.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <fstream>

#include "kforge/cuda/loaded_kernel.h"
#include "kforge/cuda/nvrtc_compiler.h"

namespace kforge::cuda_worker {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kWarmKernel = R"(
extern "C" __global__ void kforge_warm(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * i;
}
)";

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("model name")) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "cpu";
}

// Runs one warm-up step, recording its time or its error.
template <typename Fn>
bool step(Json& steps, Json& errors, const char* name, Fn&& fn) {
  const auto start = Clock::now();
  Status s = fn();
  steps[name] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!s) errors[name] = s.message();
  return s.is_ok();
}

}  // namespace

int cuda_device_number(std::string_view device) {
  if (!device.starts_with("cuda:")) return -1;
  const std::string_view digits = device.substr(5);
  const char* end = digits.data() + digits.size();
  int number = -1;
  auto [stop, error] = std::from_chars(digits.data(), end, number);
  if (error != std::errc() || stop != end || number < 0) return -1;
  return number;
}

std::unique_ptr<WorkerRuntime> WorkerRuntime::start(const WorkerRuntimeOptions& options) {
  std::unique_ptr<WorkerRuntime> rt(new WorkerRuntime(options));
  step(rt->steps_ms_, rt->errors_, "nvrtc_load", [&]() -> Status {
    auto api = cuda::NvrtcApi::load({});
    if (!api.is_ok()) {
      rt->nvrtc_error_ = api.status().message();
      return api.status();
    }
    rt->nvrtc_ = *api;
    return Status::ok();
  });
  const int physical = cuda_device_number(options.device);
  if (physical >= 0) {
    rt->open_gpu(physical);
  } else if (options.device.starts_with("cuda:")) {
    rt->no_device_reason_ = "device '" + options.device + "' is not cuda:N";
  } else if (!options.why_no_gpu.empty()) {
    rt->no_device_reason_ = "no CUDA device on this server (" + options.why_no_gpu + ")";
  } else {
    rt->no_device_reason_ =
        "kernel_type 'cuda' cannot run on the cpu device of this server: send the job to a "
        "GPU (device \"cuda:N\", or leave device empty)";
  }
  rt->warm_nvrtc_and_launch();
  return rt;
}

void WorkerRuntime::open_gpu(int physical_index) {
  physical_index_ = physical_index;
  // The supervisor sets CUDA_VISIBLE_DEVICES to this one GPU; without it, the ordinal is N.
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only; the worker never changes its environment
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const int ordinal = visible != nullptr && *visible != '\0' ? 0 : physical_index;
  std::shared_ptr<const cuda::DriverApi> api;
  bool ok = step(steps_ms_, errors_, "cuda_init", [&]() -> Status {
    KF_ASSIGN_OR_RETURN(api, cuda::DriverApi::load());
    return Status::ok();
  });
  ok = ok && step(steps_ms_, errors_, "cuda_context", [&]() -> Status {
         KF_ASSIGN_OR_RETURN(device_, cuda::CudaDevice::open(api, ordinal));
         return Status::ok();
       });
  ok = ok &&
       (options_.profile_target || step(steps_ms_, errors_, "l2_flush_buffer", [&]() -> Status {
          KF_ASSIGN_OR_RETURN(timer_, cuda::GpuTimer::create(*device_));
          return Status::ok();
        }));
  if (!ok) {
    no_device_reason_ =
        "CUDA is unavailable on " + options_.device + ": " +
        (errors_.empty() ? std::string("unknown error") : errors_.begin()->get<std::string>());
    device_.reset();
    timer_.reset();
  }
}

void WorkerRuntime::warm_nvrtc_and_launch() {
  if (!nvrtc_) return;
  cuda::CompileResult compiled;
  bool ok = step(steps_ms_, errors_, "nvrtc_first_compile", [&]() -> Status {
    KF_ASSIGN_OR_RETURN(auto compiler, cuda::NvrtcCompiler::create({nvrtc_, {}}));
    KF_ASSIGN_OR_RETURN(compiled, compiler->compile({kWarmKernel, "kforge_warm", {}, arch()}));
    return Status::ok();
  });
  if (!ok || !device_ || options_.profile_target) return;
  step(steps_ms_, errors_, "first_launch", [&]() -> Status {
    KF_ASSIGN_OR_RETURN(auto kernel,
                        cuda::LoadedKernel::load(device_->api_ptr(), compiled.kernel, 0));
    KF_ASSIGN_OR_RETURN(cuda::DeviceBuffer out, device_->alloc(256 * sizeof(float)));
    CUdeviceptr ptr = out.ptr();
    int n = 256;
    void* params[] = {&ptr, &n};
    KF_RETURN_IF_ERROR(kernel->launch({{1, 1, 1}, {256, 1, 1}, 0}, params, device_->stream()));
    return device_->synchronize("warm-up launch");
  });
}

std::string WorkerRuntime::arch() const {
  if (device_) return device_->info().arch();
  return options_.arch.empty() ? std::string("sm_90a") : options_.arch;
}

Json WorkerRuntime::describe_device() const {
  Json d;
  if (device_) {
    const cuda::GpuInfo& g = device_->info();
    d = {{"kind", "cuda"},
         {"index", g.index},
         {"physical_index", physical_index_},
         {"name", g.name},
         {"capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
         {"arch", g.arch()},
         {"sm_count", g.sm_count},
         {"total_memory_bytes", g.total_memory_bytes},
         {"l2_cache_bytes", g.l2_cache_bytes},
         {"cuda_version", cuda::cuda_version_string(g.driver_version)},
         {"driver_version", g.driver_version},
         {"runtime", "native"}};
  } else {
    d = {{"kind", "cpu"},
         {"name", cpu_model()},
         {"threads", static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))},
         {"runtime", "native"},
         {"cuda", no_device_reason_}};
  }
  d["nvrtc"] = nvrtc_ ? Json{{"version", nvrtc_->version()},
                             {"library", nvrtc_->library_path()},
                             {"include_dir", nvrtc_->include_dir()}}
                      : Json{{"error", nvrtc_error_}};
  d["compile_arch"] = arch();
  return d;
}

}  // namespace kforge::cuda_worker
