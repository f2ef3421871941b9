#include "kforge/cuda_worker/cuda_job.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "kforge/cuda/compile_request.h"
#include "kforge/cuda/device_inventory.h"
#include "kforge/cuda/nvrtc_compiler.h"
#include "kforge/cuda_worker/correctness.h"
#include "kforge/cuda_worker/job_kernel.h"
#include "kforge/cuda_worker/job_spec.h"
#include "kforge/cuda_worker/ncu_runner.h"

namespace kforge::cuda_worker {
namespace {

constexpr double kExcessiveSpeedup = 10.0;

Json base_metadata(const Json& spec, const WorkerRuntime& rt) {
  Json kernel = spec.is_object() ? spec.value("kernel", Json::object()) : Json::object();
  Json meta = {{"device",
                spec.is_object() ? spec.value("device", rt.options().device) : rt.options().device},
               {"gpu_type", nullptr},
               {"gpu_id", nullptr},
               {"cuda_version", nullptr},
               {"kernel_type", kernel.value("kernel_type", "cuda")},
               {"kernel_name", nullptr},
               {"timing_method", nullptr},
               {"seed", spec.is_object() ? spec.value("seed", Json()) : Json()},
               {"inputs", Json::array()},
               {"worker_runtime", "native"},
               {"compile_arch", rt.arch()}};
  if (kernel.contains("metadata") && kernel["metadata"].is_object()) {
    const Json& m = kernel["metadata"];
    if (m.contains("kernel_name")) meta["kernel_name"] = m["kernel_name"];
    if (m.contains("entry_point") && m["entry_point"].is_string()) {
      meta["kernel_name"] = m["entry_point"];
    }
  }
  if (rt.device() != nullptr) {
    const cuda::GpuInfo& g = rt.device()->info();
    meta["gpu_type"] = g.name;
    meta["gpu_id"] = cuda_device_number(rt.options().device);
    meta["cuda_version"] = cuda::cuda_version_string(g.driver_version);
  }
  if (rt.nvrtc()) meta["nvrtc_version"] = rt.nvrtc()->version();
  if (spec.is_object() && spec.contains("reference") && spec["reference"].is_object()) {
    meta["ref_kernel_type"] = spec["reference"].value("kernel_type", "");
  }
  return meta;
}

class Pipeline {
 public:
  Pipeline(const Json& spec, const NativeJob& job, WorkerRuntime& rt, JobResult& result,
           const ProgressFn& progress, AcquireDeviceFn acquire_device = {})
      : spec_(spec),
        job_(job),
        rt_(rt),
        result_(result),
        progress_(progress),
        acquire_device_(std::move(acquire_device)) {}

  void run();
  // `repeat` launches of `role` on the timing inputs (for a profiler), then a sync.
  Status replay(const std::string& role, int repeat);

 private:
  void report(const std::string& phase, const std::string& message) {
    if (progress_) progress_(phase, message, result_.to_json());
  }
  // Compiles one kernel; false (with the error in the result) when it does not compile.
  bool compile(JobKernel& kernel, const std::string& field);
  bool load(JobKernel& kernel);
  std::optional<cuda::TimingReport> time(JobKernel& kernel, const std::vector<cuda::HostTensor>& t,
                                         const std::string& who);
  void timing();
  ActivityResult activity_of(const cuda::TimingReport& timed) {
    cuda::KernelActivity a = rt_.timer()->profile(timed, job_.request.timing);
    auto flags = timed.flags(a);
    return {std::move(a), std::move(flags)};
  }

  const Json& spec_;
  const NativeJob& job_;
  WorkerRuntime& rt_;
  JobResult& result_;
  const ProgressFn& progress_;
  const AcquireDeviceFn acquire_device_;  // empty: the job has the device to itself
  std::unique_ptr<cuda::NvrtcCompiler> compiler_;
  JobKernel candidate_;
  JobKernel reference_;
  bool has_reference_ = false;
};

bool Pipeline::compile(JobKernel& kernel, const std::string& field) {
  const bool is_reference = kernel.role == "reference";
  const std::string prefix = is_reference ? "reference kernel: " : "";
  auto request = cuda::make_compile_request(*kernel.code, rt_.arch(), field);
  if (!request.is_ok()) {
    result_.compiled = is_reference;
    result_.fail(model::ErrorKind::kCompile, prefix + request.status().to_string());
    return false;
  }
  auto compiled = compiler_->compile(*request);
  if (!compiled.is_ok()) {
    const Status& s = compiled.status();
    if (s.code() == ErrorCode::kInvalidArgument) {
      result_.compiled = is_reference;
      result_.fail(model::ErrorKind::kCompile, prefix + s.message());
    } else {
      result_.fail(model::ErrorKind::kWorker, prefix + "NVRTC failed: " + s.message());
    }
    return false;
  }
  kernel.compiled = std::move(compiled).value();
  Json info = {{"arch", kernel.compiled.kernel.arch},
               {"format", kernel.compiled.kernel.format},
               {"cache", kernel.compiled.cache_hit ? "hit" : "miss"},
               {"compile_ms", kernel.compiled.compile_ms},
               {"options", request->options},
               {"log", kernel.compiled.kernel.log}};
  result_.metadata[is_reference ? "ref_compile" : "compile"] = info;
  if (!kernel.compiled.kernel.log.empty() && !is_reference) {
    result_.warn("NVRTC: " + kernel.compiled.kernel.log);
  }
  return true;
}

bool Pipeline::load(JobKernel& kernel) {
  const unsigned smem = static_cast<unsigned>(
      kernel.io().launch ? kernel.io().launch->shared_mem_bytes.value_or(0) : 0);
  auto loaded = cuda::LoadedKernel::load(rt_.device()->api_ptr(), kernel.compiled.kernel, smem);
  if (!loaded.is_ok()) {
    result_.fail(
        model::ErrorKind::kRuntime,
        (kernel.role == "reference" ? "the reference kernel: " : "") + loaded.status().message());
    return false;
  }
  kernel.loaded = std::move(loaded).value();
  if (kernel.role == "candidate")
    result_.metadata["kernel_attributes"] = kernel.loaded->attributes();
  return true;
}

void Pipeline::run() {
  if (!rt_.nvrtc()) {
    result_.fail(model::ErrorKind::kWorker,
                 "NVRTC is unavailable in the native CUDA worker: " + rt_.nvrtc_error());
    return;
  }
  std::filesystem::path cache;
  if (!job_.cache_dir.empty()) cache = std::filesystem::path(job_.cache_dir) / "cuda";
  auto compiler = cuda::NvrtcCompiler::create({rt_.nvrtc(), cache});
  if (!compiler.is_ok()) {
    result_.fail(model::ErrorKind::kWorker, compiler.status().message());
    return;
  }
  compiler_ = std::move(compiler).value();
  candidate_ = {"candidate", &job_.request.kernel, {}, nullptr};
  has_reference_ = job_.request.reference.has_value();
  if (has_reference_) reference_ = {"reference", &*job_.request.reference, {}, nullptr};

  report("loading", "compiling the kernel with NVRTC");
  {
    // NVRTC (or the compile cache) and loading the modules are the `compile` phase.
    PhaseClock::Scope phase(result_.phases, "compile");
    if (!compile(candidate_, "kernel")) return;
    if (has_reference_ && !compile(reference_, "reference")) {
      result_.compiled = true;
      return;
    }
  }
  result_.compiled = true;
  result_.metadata["input_source"] = "candidate_io";
  result_.metadata["inputs"] = describe_inputs(candidate_.io());
  if (rt_.device() == nullptr) {
    result_.fail(model::ErrorKind::kRuntime, rt_.no_device_reason() + "; the kernel compiled for " +
                                                 rt_.arch() + " with NVRTC " +
                                                 rt_.nvrtc()->version() +
                                                 ", but kernel_type 'cuda' runs only on a GPU");
    return;
  }
  if (acquire_device_) {
    // The CPU phase is over: from here on the job uses the GPU, so it waits for the grant.
    report("waiting_for_device", "compiled; waiting for the device");
    if (Status s = acquire_device_(); !s) {
      result_.fail(model::ErrorKind::kWorker, "the device was not granted: " + s.message());
      return;
    }
  }
  {
    PhaseClock::Scope phase(result_.phases, "compile");
    if (!load(candidate_) || (has_reference_ && !load(reference_))) return;
  }

  report("correctness", std::to_string(job_.request.num_correct_trials) + " correctness trial(s)");
  CorrectnessContext ctx{*rt_.device(), candidate_, has_reference_ ? &reference_ : nullptr, job_,
                         result_};
  result_.correctness = run_correctness(ctx);
  if (!result_.correctness || !job_.request.measure_performance) return;
  PhaseClock::Scope phase(result_.phases, "timing");
  timing();
}

std::optional<cuda::TimingReport> Pipeline::time(JobKernel& kernel,
                                                 const std::vector<cuda::HostTensor>& tensors,
                                                 const std::string& who) {
  auto bound = BoundLaunch::bind(*rt_.device(), kernel, tensors);
  if (!bound.is_ok()) {
    result_.fail(model::ErrorKind::kRuntime,
                 who + " could not be prepared for timing: " + bound.status().message());
    return std::nullopt;
  }
  // The launch outlives this call: profile() re-runs it after every kernel is timed.
  auto launch = std::make_shared<BoundLaunch>(std::move(bound).value());
  auto report =
      rt_.timer()->time([launch](CUstream s) { return launch->launch(s); }, job_.request.timing);
  if (!report.is_ok()) {
    result_.fail(model::ErrorKind::kRuntime,
                 who + " failed while being timed: " + report.status().message());
    return std::nullopt;
  }
  return std::move(report).value();
}

Status Pipeline::replay(const std::string& role, int repeat) {
  if (!rt_.nvrtc()) return unavailable("NVRTC is unavailable: " + rt_.nvrtc_error());
  if (rt_.device() == nullptr) return unavailable(rt_.no_device_reason());
  std::filesystem::path cache;
  if (!job_.cache_dir.empty()) cache = std::filesystem::path(job_.cache_dir) / "cuda";
  KF_ASSIGN_OR_RETURN(compiler_, cuda::NvrtcCompiler::create({rt_.nvrtc(), cache}));
  candidate_ = {"candidate", &job_.request.kernel, {}, nullptr};
  has_reference_ = job_.request.reference.has_value();
  if (has_reference_) reference_ = {"reference", &*job_.request.reference, {}, nullptr};
  if (role == "reference" && !has_reference_) return invalid_argument("the job has no reference");
  JobKernel& kernel = role == "reference" ? reference_ : candidate_;
  if (!compile(kernel, role == "reference" ? "reference" : "kernel") || !load(kernel)) {
    return Status(ErrorCode::kInternal,
                  "the " + role + " kernel does not load: " +
                      result_.compilation_error.value_or(result_.runtime_error.value_or("")));
  }
  // The timing inputs: a fresh set, trial index num_correct_trials (as timing() makes them).
  KF_ASSIGN_OR_RETURN(auto inputs, cuda::make_host_inputs(candidate_.io(), *job_.request.seed,
                                                          job_.request.num_correct_trials));
  std::vector<cuda::HostTensor> tensors;
  tensors.reserve(inputs.size());
  for (const auto& a : inputs)
    tensors.push_back(a.data);
  if (role == "reference") {
    KF_ASSIGN_OR_RETURN(tensors, bind_reference_tensors(reference_.io(), inputs));
  }
  KF_ASSIGN_OR_RETURN(BoundLaunch bound, BoundLaunch::bind(*rt_.device(), kernel, tensors));
  for (int i = 0; i < repeat; ++i)
    KF_RETURN_IF_ERROR(bound.launch(rt_.device()->stream()));
  return rt_.device()->synchronize("the replayed kernel failed");
}

void Pipeline::timing() {
  const int trial = job_.request.num_correct_trials;  // a fresh input set, not a checked one
  auto inputs = [&] {
    PhaseClock::Scope phase(result_.phases, "inputs");
    return cuda::make_host_inputs(candidate_.io(), *job_.request.seed, trial);
  }();
  if (!inputs.is_ok()) {
    result_.fail(model::ErrorKind::kRuntime,
                 "could not build the timing inputs: " + inputs.status().message());
    return;
  }
  std::vector<cuda::HostTensor> tensors;
  for (const auto& a : *inputs)
    tensors.push_back(a.data);
  std::optional<cuda::TimingReport> ref;
  if (has_reference_) {
    report("timing_reference", "timing the reference");
    auto ref_tensors = bind_reference_tensors(reference_.io(), *inputs);
    if (!ref_tensors.is_ok()) {
      result_.fail(model::ErrorKind::kRuntime, ref_tensors.status().message());
      return;
    }
    ref = time(reference_, *ref_tensors, "the reference kernel");
    if (!ref) return;
    result_.ref_runtime_stats = ref->stats;
    result_.ref_runtime = ref->stats.median;
  }
  report("timing_candidate", "timing the kernel");
  auto cand = time(candidate_, tensors, "the kernel");
  if (!cand) return;
  // Profiled passes after every timed trial, so the profiler is in none of them.
  report("kernel_activity", "profiling the timed window");
  if (ref) result_.ref_activity = activity_of(*ref);
  result_.activity = activity_of(*cand);
  if (!result_.activity.activity.measured) {
    result_.warn("kernel activity not measured: " + result_.activity.activity.reason);
  }
  for (const auto& f : result_.activity.activity.flags)
    result_.warn("kernel activity [" + f.code + "]: " + f.message);
  if (!job_.device_metrics.is_null()) {
    report("device_metrics", "profiling under Nsight Compute");
    std::vector<std::string> roles = {"candidate"};
    if (has_reference_) roles.emplace_back("reference");
    result_.device_metrics_raw =
        run_device_metrics(spec_, job_.device_metrics, rt_.options().device, roles);
  }
  // The headline is the device's time for the call: the event window's own time comes off
  // both kernels' statistics (after the activity, which compares event times).
  if (auto overhead = rt_.timer()->window_overhead_ms(job_.request.timing); overhead.is_ok()) {
    cand->stats = cuda::without_window_overhead(cand->stats, *overhead);
    cand->samples = cuda::without_window_overhead(std::move(cand->samples), *overhead);
    if (ref) ref->samples = cuda::without_window_overhead(std::move(ref->samples), *overhead);
    if (result_.ref_runtime_stats) {
      result_.ref_runtime_stats =
          cuda::without_window_overhead(*result_.ref_runtime_stats, *overhead);
      result_.ref_runtime = result_.ref_runtime_stats->median;
    }
  } else {
    result_.fail(model::ErrorKind::kRuntime,
                 "measuring the event window's own time: " + overhead.status().message());
    return;
  }
  result_.runtime_stats = cand->stats;
  result_.runtime = cand->stats.median;
  result_.metadata["timing_method"] = cand->stats.method;
  result_.metadata["l2_flush_bytes"] = rt_.timer()->flush_bytes();
  for (const auto& w : cand->warnings)
    result_.warn(w);
  result_.add_check("launch_stream_only", cand->stream_skew.empty(), cand->stream_skew, false);
  if (result_.ref_runtime_stats && cand->stats.median > 0) {
    double speedup = result_.ref_runtime_stats->median / cand->stats.median;
    result_.speedup = speedup;
    if (ref) {
      result_.speedup_ci =
          cuda::speedup_interval(ref->samples, cand->samples, job_.request.seed.value_or(0));
      result_.speedup_verdict = model::speedup_verdict(result_.speedup_ci);
    }
    bool plausible = speedup <= kExcessiveSpeedup;
    std::string message;
    if (!plausible) {
      message = "speedup " + cuda::format_number(speedup) +
                "x over the reference exceeds 10x: "
                "check that the kernel does the full work (no cached results, no skipped "
                "elements)";
      result_.warn(message);
    }
    result_.add_check("speedup_plausible", plausible, message, false);
  }
}

}  // namespace

JobResult run_cuda_job(const Json& spec, WorkerRuntime& runtime, const ProgressFn& progress,
                       const AcquireDeviceFn& acquire_device) {
  JobResult result;
  result.metadata = base_metadata(spec, runtime);
  if (runtime.device() == nullptr) {
    result.activity.activity = cuda::activity_not_measured(cuda::kNotMeasuredOnCpu);
    result.ref_activity.activity = cuda::activity_not_measured(cuda::kNotMeasuredOnCpu);
  }
  auto job = parse_native_job(spec);
  if (!job.is_ok()) {
    result.fail(model::ErrorKind::kWorker, "bad job spec: " + job.status().to_string());
    return result;
  }
  if (job->device != runtime.options().device && !job->device.empty()) {
    result.fail(model::ErrorKind::kWorker,
                "job is for " + job->device + ", worker runs on " + runtime.options().device);
    return result;
  }
  Pipeline(spec, *job, runtime, result, progress, acquire_device).run();
  return result;
}

Status replay_cuda_job(const Json& spec, WorkerRuntime& runtime, const std::string& role,
                       int repeat) {
  KF_ASSIGN_OR_RETURN(NativeJob job, parse_native_job(spec));
  JobResult result;
  return Pipeline(spec, job, runtime, result, ProgressFn()).replay(role, repeat);
}

}  // namespace kforge::cuda_worker
