#include "kforge/cuda/gpu_timer.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "kforge/cuda/activity_recorder.h"
#include "kforge/cuda/cupti_api.h"

namespace kforge::cuda {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The protocol's kernels, JIT-compiled by the driver from PTX (cached in CUDA_CACHE_PATH).
// kforge_spin busy-waits until %globaltimer (ns) has advanced by `ns`. kforge_l2_read reads
// n16 16-byte words with a grid-stride loop and stores their XOR only when it equals a
// value the zero-filled buffer cannot produce, so the loads are never optimised away.
constexpr const char* kProtocolPtx = R"(
.version 7.0
.target sm_70
.address_size 64

.visible .entry kforge_spin(.param .u64 kforge_spin_ns)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [kforge_spin_ns];
  mov.u64 %rd2, %globaltimer;
$L_spin:
  mov.u64 %rd3, %globaltimer;
  sub.u64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p1, %rd4, %rd1;
  @%p1 bra $L_spin;
  ret;
}

.visible .entry kforge_l2_read(.param .u64 kforge_l2_read_buf, .param .u64 kforge_l2_read_n16,
                               .param .u64 kforge_l2_read_sink)
{
  .reg .pred %p<3>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<10>;
  ld.param.u64 %rd1, [kforge_l2_read_buf];
  ld.param.u64 %rd2, [kforge_l2_read_n16];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mul.wide.u32 %rd3, %r1, %r2;
  cvt.u64.u32 %rd4, %r3;
  add.u64 %rd3, %rd3, %rd4;
  mul.wide.u32 %rd5, %r4, %r2;
  mov.u32 %r5, 0;
  setp.ge.u64 %p1, %rd3, %rd2;
  @%p1 bra $L_done;
$L_loop:
  shl.b64 %rd6, %rd3, 4;
  add.u64 %rd7, %rd1, %rd6;
  ld.global.v4.u32 {%r6, %r7, %r8, %r9}, [%rd7];
  xor.b32 %r5, %r5, %r6;
  xor.b32 %r5, %r5, %r7;
  xor.b32 %r5, %r5, %r8;
  xor.b32 %r5, %r5, %r9;
  add.u64 %rd3, %rd3, %rd5;
  setp.lt.u64 %p2, %rd3, %rd2;
  @%p2 bra $L_loop;
$L_done:
  setp.ne.u32 %p1, %r5, 1802465138;
  @%p1 bra $L_end;
  ld.param.u64 %rd8, [kforge_l2_read_sink];
  cvta.to.global.u64 %rd8, %rd8;
  st.global.u32 [%rd8], %r5;
$L_end:
  ret;
}
)";

constexpr unsigned kReadBlock = 256;
constexpr unsigned kReadBlocksPerSm = 8;

}  // namespace

std::vector<ActivityFlag> TimingReport::flags(const KernelActivity& activity) const {
  std::vector<ActivityFlag> out;
  if (!launch_not_hidden.empty()) out.push_back({"launch_not_hidden", launch_not_hidden});
  if (!stream_skew.empty()) out.push_back({"work_outside_launch_stream", stream_skew});
  out.insert(out.end(), activity.flags.begin(), activity.flags.end());
  return out;
}

StatusOr<std::unique_ptr<GpuTimer>> GpuTimer::create(CudaDevice& device) {
  std::unique_ptr<GpuTimer> t(new GpuTimer(device));
  const DriverApi& api = device.api();
  size_t bytes =
      std::max<size_t>(2 * static_cast<size_t>(device.info().l2_cache_bytes), kMinFlushBytes);
  bytes -= bytes % 16;
  KF_ASSIGN_OR_RETURN(t->flush_, device.alloc(bytes));
  KF_ASSIGN_OR_RETURN(t->sink_, device.alloc(sizeof(uint32_t)));
  KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuMemsetD8Async(t->flush_.ptr(), 0, bytes, device.stream()),
                               "cuMemsetD8Async (L2 flush buffer)");
  KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuModuleLoadData(&t->module_, kProtocolPtx),
                               "cuModuleLoadData (timing protocol kernels)");
  KF_RETURN_IF_CUDA_DRIVER_ERR(api,
                               api.cuModuleGetFunction(&t->spin_fn_, t->module_, "kforge_spin"),
                               "cuModuleGetFunction(kforge_spin)");
  KF_RETURN_IF_CUDA_DRIVER_ERR(api,
                               api.cuModuleGetFunction(&t->read_fn_, t->module_, "kforge_l2_read"),
                               "cuModuleGetFunction(kforge_l2_read)");
  KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuEventCreate(&t->start_, CU_EVENT_DEFAULT),
                               "cuEventCreate");
  KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuEventCreate(&t->end_, CU_EVENT_DEFAULT), "cuEventCreate");
  KF_RETURN_IF_ERROR(t->flush_l2());
  KF_RETURN_IF_ERROR(t->spin(1.0));
  KF_RETURN_IF_ERROR(device.synchronize("first L2 flush and spin"));
  return t;
}

GpuTimer::~GpuTimer() {
  const DriverApi& api = device_.api();
  if (start_ != nullptr) api.cuEventDestroy(start_);
  if (end_ != nullptr) api.cuEventDestroy(end_);
  if (module_ != nullptr) api.cuModuleUnload(module_);
}

Status GpuTimer::flush_l2() {
  const DriverApi& api = device_.api();
  if (persisting_reset_ok_) {
    persisting_reset_ok_ = api.cuCtxResetPersistingL2Cache != nullptr &&
                           api.cuCtxResetPersistingL2Cache() == CUDA_SUCCESS;
  }
  CUdeviceptr buf = flush_.ptr();
  auto n16 = static_cast<uint64_t>(flush_.bytes() / 16);
  CUdeviceptr sink = sink_.ptr();
  void* params[] = {&buf, &n16, &sink};
  const auto blocks =
      static_cast<unsigned>(std::max(1, device_.info().sm_count)) * kReadBlocksPerSm;
  return api.check(api.cuLaunchKernel(read_fn_, blocks, 1, 1, kReadBlock, 1, 1, 0, device_.stream(),
                                      params, nullptr),
                   "cuLaunchKernel (L2 flush read)");
}

Status GpuTimer::spin(double us) {
  const DriverApi& api = device_.api();
  auto ns = static_cast<uint64_t>(us * 1e3);
  void* params[] = {&ns};
  return api.check(
      api.cuLaunchKernel(spin_fn_, 1, 1, 1, 1, 1, 1, 0, device_.stream(), params, nullptr),
      "cuLaunchKernel (spin)");
}

CUgraphExec GpuTimer::capture(const LaunchFn& launch, std::vector<std::string>& warnings) {
  const DriverApi& api = device_.api();
  CUstream stream = device_.stream();
  std::string why;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  if (Status s = api.check(api.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                           "cuStreamBeginCapture");
      !s) {
    why = s.message();
  } else {
    Status launched = launch(stream);
    Status ended = api.check(api.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
    if (!launched) {
      why = launched.message();
    } else if (!ended) {
      why = ended.message();
    } else if (Status made =
                   api.check(api.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
               !made) {
      why = made.message();
      exec = nullptr;
    }
  }
  if (graph != nullptr) api.cuGraphDestroy(graph);
  if (exec == nullptr) {
    warnings.push_back("CUDA-graph capture failed, timed eager launches instead: " + why);
  }
  return exec;
}

StatusOr<double> GpuTimer::measure_enqueue_ms(const LaunchFn& call) {
  std::vector<double> samples;
  for (int i = 0; i < kEnqueueSamples; ++i) {
    KF_RETURN_IF_ERROR(device_.synchronize("the kernel failed during timing warm-up"));
    const auto t0 = Clock::now();
    KF_RETURN_IF_ERROR(call(device_.stream()));
    samples.push_back(ms_since(t0));
  }
  KF_RETURN_IF_ERROR(device_.synchronize("the kernel failed during timing warm-up"));
  return median_of(std::move(samples));
}

StatusOr<GpuTimer::Trial> GpuTimer::run_trial(const LaunchFn& call, bool l2_flush, double spin_us,
                                              const ActivityRecorder* recorder, int index) {
  const DriverApi& api = device_.api();
  CUstream stream = device_.stream();
  if (l2_flush) {
    ActivityRecorder::Tag tag(recorder, OpOwner::kFlush, index);
    KF_RETURN_IF_ERROR(flush_l2());
  }
  KF_RETURN_IF_ERROR(device_.synchronize("the kernel failed during timing"));
  const auto spin_enqueued = Clock::now();
  {
    ActivityRecorder::Tag tag(recorder, OpOwner::kSpin, index);
    KF_RETURN_IF_ERROR(spin(spin_us));
  }
  KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuEventRecord(start_, stream), "cuEventRecord");
  const auto host_start = Clock::now();
  {
    ActivityRecorder::Tag tag(recorder, OpOwner::kWindow, index);
    KF_RETURN_IF_ERROR(call(stream));
  }
  Trial trial;
  trial.enqueue_ms = ms_since(host_start);
  KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuEventRecord(end_, stream), "cuEventRecord");
  const CUresult started = api.cuEventQuery(start_);
  if (started != CUDA_SUCCESS && started != CUDA_ERROR_NOT_READY) {
    KF_RETURN_IF_ERROR(api.check(started, "cuEventQuery"));
  }
  trial.launch_hidden = started == CUDA_ERROR_NOT_READY;
  KF_RETURN_IF_ERROR(device_.synchronize("the kernel failed during timing"));
  const auto done = Clock::now();
  // The device-synchronised time starts where the spin is expected to end.
  const auto spin_end = spin_enqueued + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double, std::micro>(spin_us));
  trial.synced_ms = std::max(
      0.0,
      std::chrono::duration<double, std::milli>(done - std::max(host_start, spin_end)).count());
  float ms = 0;
  KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuEventElapsedTime(&ms, start_, end_),
                               "cuEventElapsedTime");
  trial.event_ms = static_cast<double>(ms);
  return trial;
}

StatusOr<TimingReport> GpuTimer::time(const LaunchFn& launch, const model::TimingOptions& options) {
  const DriverApi& api = device_.api();
  CUstream stream = device_.stream();
  TimingReport report;

  int warmups = 0;
  const auto warm_start = Clock::now();
  while (warmups < options.warmup_calls || ms_since(warm_start) < options.warmup_ms) {
    KF_RETURN_IF_ERROR(launch(stream));
    KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuStreamSynchronize(stream),
                                 "the kernel failed during timing warm-up");
    ++warmups;
  }

  std::string method = "cuda_event";
  report.call = launch;
  if (options.cuda_graph) {
    if (CUgraphExec exec = capture(launch, report.warnings); exec != nullptr) {
      std::shared_ptr<CUgraphExec_st> graph(
          exec, [api = device_.api_ptr()](CUgraphExec g) { api->cuGraphExecDestroy(g); });
      // The replay keeps the launch (and the buffers it binds) alive: the graph's kernel
      // nodes point at them, and the caller's launch may go before profile() replays it.
      report.call = [graph, launch, api = device_.api_ptr()](CUstream s) {
        return api->check(api->cuGraphLaunch(graph.get(), s), "cuGraphLaunch");
      };
      method = "cuda_graph";
    }
  }
  KF_ASSIGN_OR_RETURN(const double enqueue_ms, measure_enqueue_ms(report.call));
  double spin_us = spin_us_for(enqueue_ms);

  std::vector<double> events;
  std::vector<double> synced;
  int uncovered = 0;  // counted trials whose launch was not hidden
  int growths = 0;
  std::string reason;
  const auto loop_start = Clock::now();
  while (reason.empty()) {
    KF_ASSIGN_OR_RETURN(Trial trial, run_trial(report.call, options.l2_flush, spin_us, nullptr,
                                               static_cast<int>(events.size())));
    if (!trial.launch_hidden) {
      if (growths < kMaxSpinGrowths) {
        // Its time holds the host's launch (tens of us, which would dominate the mean of a
        // few trials of a small kernel): run it again with a longer spin, uncounted.
        ++growths;
        spin_us = next_spin_us(spin_us, trial.enqueue_ms);
        continue;
      }
      ++uncovered;
    }
    events.push_back(trial.event_ms);
    synced.push_back(trial.synced_ms);
    reason = stop_reason(events, options, ms_since(loop_start));
  }

  report.stats = compute_stats(events, method);
  report.samples = events;
  report.stats.l2_flush = options.l2_flush;
  report.stats.warmup_calls = warmups;
  report.stats.stop_reason = reason;
  report.stats.spin_us = spin_us;
  report.stats.enqueue_ms = enqueue_ms;
  report.stats.launch_not_hidden_trials = uncovered;
  const double sync_median = median_of(synced);
  report.stats.device_sync_median = sync_median;
  if (options.l2_flush && !persisting_reset_ok_) {
    report.warnings.push_back(
        "could not reset the persisting L2 cache (cuCtxResetPersistingL2Cache)");
  }
  report.stream_skew = stream_skew_message(sync_median, report.stats.median);
  if (!report.stream_skew.empty()) report.warnings.push_back(report.stream_skew);
  report.launch_not_hidden =
      launch_not_hidden_message(uncovered, static_cast<int>(events.size()), enqueue_ms);
  if (!report.launch_not_hidden.empty()) report.warnings.push_back(report.launch_not_hidden);
  return report;
}

KernelActivity GpuTimer::profile(const TimingReport& timed, const model::TimingOptions& options) {
  if (!timed.call) return activity_not_measured("nothing was timed on the GPU");
  auto api = CuptiApi::load();
  if (!api.is_ok()) return activity_not_measured("CUPTI unavailable: " + api.status().message());
  auto recorder = ActivityRecorder::start(*api);
  if (!recorder.is_ok()) {
    return activity_not_measured("CUPTI activity unavailable: " + recorder.status().message());
  }
  const double spin_us = timed.stats.spin_us.value_or(spin_us_for(0));
  std::vector<double> events;
  for (int i = 0; i < kProfiledTrials; ++i) {
    auto trial = run_trial(timed.call, options.l2_flush, spin_us, recorder->get(), i);
    if (!trial.is_ok()) {
      return activity_not_measured("a profiled trial failed: " + trial.status().message());
    }
    events.push_back(trial->event_ms);
  }
  auto ops = (*recorder)->finish();
  if (!ops.is_ok()) return activity_not_measured(ops.status().message());
  return summarize_activity(windows_from_ops(*ops, kProfiledTrials), events, timed.stats.median,
                            "CUPTI activity (kforge worker cuda)");
}

StatusOr<double> GpuTimer::window_overhead_ms(const model::TimingOptions& options) {
  const LaunchFn nothing = [](CUstream) { return Status::ok(); };
  std::vector<double> events;
  for (int i = 0; i < kWindowProbeTrials; ++i) {
    KF_ASSIGN_OR_RETURN(Trial trial,
                        run_trial(nothing, options.l2_flush, kSpinFloorUs, nullptr, i));
    events.push_back(trial.event_ms);
  }
  return median_of(std::move(events));
}

}  // namespace kforge::cuda
