#include "kforge/cuda/gpu_timer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace kforge::cuda {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kStreamSkewRatio = 0.5;  // as the Python worker: 50 % or 0.05 ms
constexpr double kStreamSkewFloorMs = 0.05;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

StatusOr<std::unique_ptr<GpuTimer>> GpuTimer::create(CudaDevice& device) {
  std::unique_ptr<GpuTimer> t(new GpuTimer(device));
  const DriverApi& api = device.api();
  size_t bytes =
      std::max<size_t>(2 * static_cast<size_t>(device.info().l2_cache_bytes), kMinFlushBytes);
  KF_ASSIGN_OR_RETURN(t->flush_, device.alloc(bytes));
  KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuEventCreate(&t->start_, CU_EVENT_DEFAULT),
                               "cuEventCreate");
  KF_RETURN_IF_CUDA_DRIVER_ERR(api, api.cuEventCreate(&t->end_, CU_EVENT_DEFAULT), "cuEventCreate");
  KF_RETURN_IF_ERROR(t->flush_l2());
  KF_RETURN_IF_ERROR(device.synchronize("first L2 flush"));
  return t;
}

GpuTimer::~GpuTimer() {
  const DriverApi& api = device_.api();
  if (start_ != nullptr) api.cuEventDestroy(start_);
  if (end_ != nullptr) api.cuEventDestroy(end_);
}

Status GpuTimer::flush_l2() {
  const DriverApi& api = device_.api();
  if (persisting_reset_ok_) {
    persisting_reset_ok_ = api.cuCtxResetPersistingL2Cache != nullptr &&
                           api.cuCtxResetPersistingL2Cache() == CUDA_SUCCESS;
  }
  fill_ = static_cast<unsigned char>(fill_ + 1);
  return api.check(api.cuMemsetD8Async(flush_.ptr(), fill_, flush_.bytes(), device_.stream()),
                   "cuMemsetD8Async (L2 flush)");
}

CUgraphExec GpuTimer::capture(const std::function<Status(CUstream)>& launch,
                              std::vector<std::string>& warnings) {
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

StatusOr<TimingReport> GpuTimer::time(const std::function<Status(CUstream)>& launch,
                                      const model::TimingOptions& options) {
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
  CUgraphExec graph = options.cuda_graph ? capture(launch, report.warnings) : nullptr;
  if (graph != nullptr) method = "cuda_graph";
  auto call = [&]() -> Status {
    if (graph != nullptr) return api.check(api.cuGraphLaunch(graph, stream), "cuGraphLaunch");
    return launch(stream);
  };

  std::vector<double> events;
  std::vector<double> synced;
  std::string reason;
  Status failed = Status::ok();
  const auto loop_start = Clock::now();
  while (reason.empty()) {
    if (options.l2_flush && !(failed = flush_l2())) break;
    if (!(failed = api.check(api.cuStreamSynchronize(stream), "cuStreamSynchronize"))) break;
    const auto host_start = Clock::now();
    if (!(failed = api.check(api.cuEventRecord(start_, stream), "cuEventRecord"))) break;
    if (!(failed = call())) break;
    if (!(failed = api.check(api.cuEventRecord(end_, stream), "cuEventRecord"))) break;
    if (!(failed = device_.synchronize("the kernel failed during timing"))) break;
    synced.push_back(ms_since(host_start));
    float ms = 0;
    if (!(failed = api.check(api.cuEventElapsedTime(&ms, start_, end_), "cuEventElapsedTime"))) {
      break;
    }
    events.push_back(static_cast<double>(ms));
    reason = stop_reason(events, options, ms_since(loop_start));
  }
  if (graph != nullptr) api.cuGraphExecDestroy(graph);
  KF_RETURN_IF_ERROR(failed);

  report.stats = compute_stats(events, method);
  report.stats.l2_flush = options.l2_flush;
  report.stats.warmup_calls = warmups;
  report.stats.stop_reason = reason;
  std::sort(synced.begin(), synced.end());
  const double sync_median = percentile(synced, 50);
  report.stats.device_sync_median = sync_median;
  if (options.l2_flush && !persisting_reset_ok_) {
    report.warnings.push_back(
        "could not reset the persisting L2 cache (cuCtxResetPersistingL2Cache)");
  }
  const double median = report.stats.median;
  if (sync_median - median > std::max(kStreamSkewRatio * median, kStreamSkewFloorMs)) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "work outside the launch stream: device-synchronised median %.4g ms vs "
                  "CUDA-event median %.4g ms (work the events do not cover)",
                  sync_median, median);
    report.stream_skew = buf;
    report.warnings.push_back(report.stream_skew);
  }
  return report;
}

}  // namespace kforge::cuda
