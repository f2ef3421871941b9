#include "kforge/cuda/activity_recorder.h"

#include <algorithm>
#include <limits>
#include <map>
#include <new>

#include "kforge/common/thread_annotations.h"

namespace kforge::cuda {
namespace {

constexpr size_t kBufferBytes = size_t{4} << 20;
constexpr size_t kRecordAlignment = 8;  // ACTIVITY_RECORD_ALIGNMENT
// External correlation kinds: windows carry the trial, protocol launches 2 x trial + spin.
constexpr CUpti_ExternalCorrelationKind kWindowKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
constexpr CUpti_ExternalCorrelationKind kProtocolKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_DRIVER,
                                         CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

struct Buffer {
  uint8_t* data;
  size_t valid;
};

// What CUPTI's callbacks hand over; process-wide because the callbacks are.
struct Collected {
  Mutex mu;
  std::vector<Buffer> buffers GUARDED_BY(mu);
  size_t dropped GUARDED_BY(mu) = 0;
  bool registered GUARDED_BY(mu) = false;
  bool active GUARDED_BY(mu) = false;  // a recorder is running
  std::shared_ptr<const CuptiApi> api GUARDED_BY(mu);
};

Collected& collected() {
  static Collected* c = new Collected();  // never destroyed: CUPTI may call back at exit
  return *c;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(
      ::operator new(kBufferBytes, std::align_val_t(kRecordAlignment), std::nothrow));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                               size_t /*size*/, size_t valid) {
  Collected& c = collected();
  std::shared_ptr<const CuptiApi> api;
  {
    MutexLock lock(c.mu);
    api = c.api;
  }
  size_t dropped = 0;
  if (api) api->cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped);
  MutexLock lock(c.mu);
  c.dropped += dropped;
  c.buffers.push_back({buffer, valid});
}

void free_buffer(uint8_t* data) {
  ::operator delete(data, std::align_val_t(kRecordAlignment));
}

std::optional<std::array<int, 3>> dims(int32_t x, int32_t y, int32_t z) {
  return std::array<int, 3>{x, y, z};
}

}  // namespace

StatusOr<std::unique_ptr<ActivityRecorder>> ActivityRecorder::start(
    std::shared_ptr<const CuptiApi> api) {
  Collected& c = collected();
  {
    MutexLock lock(c.mu);
    if (c.active) return Status(ErrorCode::kFailedPrecondition, "a CUPTI session is running");
    c.active = true;
    c.api = api;
  }
  std::unique_ptr<ActivityRecorder> r(new ActivityRecorder(std::move(api)));
  bool registered = false;
  {
    MutexLock lock(c.mu);
    registered = c.registered;
  }
  if (!registered) {
    KF_RETURN_IF_ERROR(
        r->api_->check(r->api_->cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                       "cuptiActivityRegisterCallbacks"));
    MutexLock lock(c.mu);
    c.registered = true;
  }
  r->enabled_ = true;  // the destructor disables whatever was enabled
  for (CUpti_ActivityKind kind : kKinds) {
    KF_RETURN_IF_ERROR(r->api_->check(r->api_->cuptiActivityEnable(kind), "cuptiActivityEnable"));
  }
  return r;
}

ActivityRecorder::~ActivityRecorder() {
  if (enabled_) {
    for (CUpti_ActivityKind kind : kKinds)
      api_->cuptiActivityDisable(kind);
    api_->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  Collected& c = collected();
  MutexLock lock(c.mu);
  for (const Buffer& b : c.buffers)
    free_buffer(b.data);
  c.buffers.clear();
  c.dropped = 0;
  c.active = false;
}

ActivityRecorder::Tag::Tag(const ActivityRecorder* recorder, OpOwner owner, int trial)
    : recorder_(recorder) {
  if (recorder_ == nullptr || owner == OpOwner::kUnknown) return;
  uint64_t id = 0;
  if (owner == OpOwner::kWindow) {
    kind_ = kWindowKind;
    id = static_cast<uint64_t>(trial);
  } else {
    kind_ = kProtocolKind;
    id = static_cast<uint64_t>(trial) * 2 + (owner == OpOwner::kSpin ? 1 : 0);
  }
  pushed_ = recorder_->api_->cuptiActivityPushExternalCorrelationId(kind_, id) == CUPTI_SUCCESS;
}

ActivityRecorder::Tag::~Tag() {
  if (!pushed_) return;
  uint64_t last = 0;
  recorder_->api_->cuptiActivityPopExternalCorrelationId(kind_, &last);
}

StatusOr<std::vector<TaggedOp>> ActivityRecorder::finish() {
  KF_RETURN_IF_ERROR(api_->check(api_->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                                 "cuptiActivityFlushAll"));
  Collected& c = collected();
  std::vector<Buffer> buffers;
  size_t dropped = 0;
  {
    MutexLock lock(c.mu);
    buffers.swap(c.buffers);
    dropped = c.dropped;
  }
  struct Kernel {
    DeviceOp op;
    uint64_t start_ns;
    uint32_t correlation;
  };
  std::vector<Kernel> kernels;
  std::map<uint32_t, std::pair<CUpti_ExternalCorrelationKind, uint64_t>> external;
  for (const Buffer& b : buffers) {
    CUpti_Activity* record = nullptr;
    while (api_->cuptiActivityGetNextRecord(b.data, b.valid, &record) == CUPTI_SUCCESS) {
      if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
          record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        if (k->end < k->start) continue;
        Kernel kernel{{}, k->start, k->correlationId};
        kernel.op.name = k->name != nullptr ? k->name : "";
        kernel.op.grid = dims(k->gridX, k->gridY, k->gridZ);
        kernel.op.block = dims(k->blockX, k->blockY, k->blockZ);
        kernel.op.stream = k->streamId;
        kernel.op.duration_us = static_cast<double>(k->end - k->start) / 1e3;
        kernels.push_back(std::move(kernel));
      } else if (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        external[e->correlationId] = {e->externalKind, e->externalId};
      }
    }
    free_buffer(b.data);
  }
  if (dropped > 0) {
    return Status(ErrorCode::kResourceExhausted,
                  "CUPTI dropped " + std::to_string(dropped) + " activity records");
  }
  // Nanoseconds since an epoch do not fit a double exactly: times are relative to the first.
  uint64_t base = std::numeric_limits<uint64_t>::max();
  for (const auto& k : kernels)
    base = std::min(base, k.start_ns);
  std::vector<TaggedOp> ops;
  ops.reserve(kernels.size());
  for (auto& k : kernels) {
    TaggedOp t;
    t.op = std::move(k.op);
    t.op.start_us = static_cast<double>(k.start_ns - base) / 1e3;
    if (auto it = external.find(k.correlation); it != external.end()) {
      const auto [kind, id] = it->second;
      if (kind == kWindowKind) {
        t.owner = OpOwner::kWindow;
        t.trial = static_cast<int>(id);
      } else if (kind == kProtocolKind) {
        t.owner = id % 2 == 1 ? OpOwner::kSpin : OpOwner::kFlush;
        t.trial = static_cast<int>(id / 2);
      }
    }
    ops.push_back(std::move(t));
  }
  return ops;
}

}  // namespace kforge::cuda
