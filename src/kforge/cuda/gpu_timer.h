// Times a kernel launch on the GPU (docs/evaluation-protocol.md "Timing"; docs/architecture.md
// "What the GPU time means"), the C++ twin of python/kforge_worker/timing/timing.py.
//
// Warm-up: calls until both `warmup_calls` and `warmup_ms` are reached; then the host time
// to enqueue one call is measured (kEnqueueSamples calls, each after a synchronisation)
// and the spin sized from it (spin_us_for). Per trial, outside the timed window: the
// persisting L2 lines are reset (cuCtxResetPersistingL2Cache) and a buffer of
// max(2 x L2, 64 MiB) is READ by kforge_l2_read (the previous trial's dirty lines are
// written back now and L2 is left holding clean lines, as ncu's --cache-control all leaves
// it); the device is synchronised; kforge_spin busy-waits on the device (%globaltimer) for
// the spin's length while the host records the start event, enqueues exactly one launch
// (or one CUDA-graph replay with `cuda_graph`) and records the end event. A start event
// already complete after that means the spin ran out first ("launch not hidden": the trial
// is not counted and runs again with a longer spin, at most kMaxSpinGrowths times; after
// that such trials count and are reported). After the end event the whole context is
// synchronised and the host clock from the spin's expected end gives a second,
// device-synchronised time per trial. Trials stop by the rule of timing_stats.h.
//
// After every kernel of a job is timed, profile() runs kProfiledTrials more trials of the
// same protocol under a CUPTI activity session (activity_recorder.h) for the kernel
// activity of kernel_activity.h; window_overhead_ms() times kWindowProbeTrials empty windows
// for the event window's own time, which the job takes off both kernels' statistics
// (timing_stats.h without_window_overhead; timing/stats.py's twin).
//
// Thread-safety: use from the thread that owns the device's context.
#pragma once

#include <cuda.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/cuda/cuda_device.h"
#include "kforge/cuda/kernel_activity.h"
#include "kforge/cuda/timing_stats.h"
#include "kforge/model/request.h"

namespace kforge::cuda {

inline constexpr size_t kMinFlushBytes = size_t{64} << 20;
inline constexpr int kWindowProbeTrials = 21;

class ActivityRecorder;

// Enqueues one call of the kernel on the given stream.
using LaunchFn = std::function<Status(CUstream)>;

struct TimingReport {
  TimingStats stats;
  std::vector<std::string> warnings;
  std::string stream_skew;        // why the device-synchronised time is far above the event time
  std::string launch_not_hidden;  // why the event time may include host launch time
  // What was timed (the launch, or the replay of its CUDA graph, which it keeps alive), for
  // profile().
  LaunchFn call;
  // Every timed trial's event time (ms), in order: what the speedup's interval resamples.
  std::vector<double> samples;

  // The timing loop's own flags (launch_not_hidden, work_outside_launch_stream), then the
  // activity's, as the result's `timing_flags`.
  std::vector<ActivityFlag> flags(const KernelActivity& activity) const;
};

class GpuTimer {
 public:
  // Allocates the flush buffer and the events and loads the protocol's kernels (done while
  // the worker warms up).
  static StatusOr<std::unique_ptr<GpuTimer>> create(CudaDevice& device);
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  // A failed launch or a fault reported by a synchronisation ends timing with that error.
  StatusOr<TimingReport> time(const LaunchFn& launch, const model::TimingOptions& options);

  // The kernel activity of kProfiledTrials more trials of `timed.call` (never fails: a
  // missing CUPTI or a failed session is an activity that says why it was not measured).
  KernelActivity profile(const TimingReport& timed, const model::TimingOptions& options);

  // The event window's own time: the median event time of trials of the protocol with
  // nothing in the window (the event pair's cost, which Nsight Compute's kernel duration
  // does not hold; about 1.25 us on an H200).
  StatusOr<double> window_overhead_ms(const model::TimingOptions& options);

  // Evicts L2 now (the flush step of a trial), on the device's stream.
  Status flush_l2();
  size_t flush_bytes() const { return flush_.bytes(); }

 private:
  struct Trial {
    double event_ms = 0;
    double synced_ms = 0;
    double enqueue_ms = 0;
    bool launch_hidden = false;
  };

  explicit GpuTimer(CudaDevice& device) : device_(device) {}
  // A graph replaying one launch, or null (with a warning) when capture fails.
  CUgraphExec capture(const LaunchFn& launch, std::vector<std::string>& warnings);
  StatusOr<double> measure_enqueue_ms(const LaunchFn& call);
  Status spin(double us);
  // One trial of the protocol; `recorder` (may be null) tags the launches of trial `index`.
  StatusOr<Trial> run_trial(const LaunchFn& call, bool l2_flush, double spin_us,
                            const ActivityRecorder* recorder, int index);

  CudaDevice& device_;
  DeviceBuffer flush_;
  DeviceBuffer sink_;
  CUmodule module_ = nullptr;
  CUfunction spin_fn_ = nullptr;
  CUfunction read_fn_ = nullptr;
  CUevent start_ = nullptr;
  CUevent end_ = nullptr;
  bool persisting_reset_ok_ = true;
};

}  // namespace kforge::cuda
