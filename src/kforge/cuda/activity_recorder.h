// A CUPTI activity session (kernel_activity.h): records the device start/end of every
// kernel launched while it runs, tagged with what the launching code declared through
// `Tag` (external correlation ids: a timed window of trial i, or the protocol's own flush
// or spin), and returns them as TaggedOps when finished.
//
// CUPTI delivers activity buffers through process-wide callbacks, so one recorder may run
// at a time in a process (start() fails with kFailedPrecondition otherwise).
//
// Thread-safety: start(), the Tags and finish() must run on the thread that launches the
// kernels; the buffer callbacks may run on CUPTI's own thread.
#pragma once

#include <memory>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/cuda/cupti_api.h"
#include "kforge/cuda/kernel_activity.h"

namespace kforge::cuda {

class ActivityRecorder {
 public:
  // Enables kernel, driver-API and external-correlation records.
  static StatusOr<std::unique_ptr<ActivityRecorder>> start(std::shared_ptr<const CuptiApi> api);
  ~ActivityRecorder();  // disables the records (finish() first to read them)
  ActivityRecorder(const ActivityRecorder&) = delete;
  ActivityRecorder& operator=(const ActivityRecorder&) = delete;

  // Launches made while a Tag lives are attributed to (owner, trial).
  class Tag {
   public:
    Tag(const ActivityRecorder* recorder, OpOwner owner, int trial);
    ~Tag();
    Tag(const Tag&) = delete;
    Tag& operator=(const Tag&) = delete;

   private:
    const ActivityRecorder* recorder_;
    CUpti_ExternalCorrelationKind kind_ = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    bool pushed_ = false;
  };

  // Flushes CUPTI's buffers (the caller has synchronised the device) and returns every
  // kernel recorded since start(). kResourceExhausted when CUPTI dropped records.
  StatusOr<std::vector<TaggedOp>> finish();

 private:
  explicit ActivityRecorder(std::shared_ptr<const CuptiApi> api) : api_(std::move(api)) {}
  std::shared_ptr<const CuptiApi> api_;
  bool enabled_ = false;
};

}  // namespace kforge::cuda
