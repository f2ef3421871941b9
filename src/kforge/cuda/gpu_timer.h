// Times a kernel launch on the GPU (DESIGN.md "Timing"; research/eval-anchors.md §8).
//
// Warm-up: calls until both `warmup_calls` and `warmup_ms` are reached. Then per trial,
// outside the timed window: the persisting L2 lines are reset (cuCtxResetPersistingL2Cache)
// and a buffer of max(2 x L2, 64 MiB) is overwritten (cuMemsetD8Async, a new byte value
// each time), the stream is synchronised; then CUDA events on the stream bracket exactly
// one launch (or one CUDA-graph replay with `cuda_graph`: the launch captured once by
// stream capture). After the end event the whole context is synchronised and the host
// clock gives a second, device-synchronised time per trial. Trials stop by the same rule
// as the Python worker (timing_stats.h).
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
#include "kforge/cuda/timing_stats.h"
#include "kforge/model/request.h"

namespace kforge::cuda {

inline constexpr size_t kMinFlushBytes = size_t{64} << 20;

struct TimingReport {
  TimingStats stats;
  std::vector<std::string> warnings;
  std::string stream_skew;  // why the device-synchronised time is far above the event time
};

class GpuTimer {
 public:
  // Allocates the flush buffer and the events (done while the worker warms up).
  static StatusOr<std::unique_ptr<GpuTimer>> create(CudaDevice& device);
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  // `launch` enqueues one call of the kernel on the given stream. A failed launch or a
  // fault reported by a synchronisation ends timing with that error.
  StatusOr<TimingReport> time(const std::function<Status(CUstream)>& launch,
                              const model::TimingOptions& options);

  // Evicts L2 now (the flush step of a trial), on the device's stream.
  Status flush_l2();
  size_t flush_bytes() const { return flush_.bytes(); }

 private:
  explicit GpuTimer(CudaDevice& device) : device_(device) {}
  // A graph replaying one launch, or null (with a warning) when capture fails.
  CUgraphExec capture(const std::function<Status(CUstream)>& launch,
                      std::vector<std::string>& warnings);

  CudaDevice& device_;
  DeviceBuffer flush_;
  CUevent start_ = nullptr;
  CUevent end_ = nullptr;
  unsigned char fill_ = 0;
  bool persisting_reset_ok_ = true;
};

}  // namespace kforge::cuda
