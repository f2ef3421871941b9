// Worker seam: something that runs one job at a time on one device, each job in a fresh
// isolated process. Implementations: PythonWorker (zygote + forked children), the native
// CUDA worker (`kforge worker cuda` processes).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/workers/cancel_token.h"

namespace kforge::workers {

// A worker's state as /health and /stats report it.
enum class WorkerState { kStopped, kStarting, kReady, kBusy, kFailed };

constexpr std::string_view worker_state_name(WorkerState s) {
  switch (s) {
    case WorkerState::kStopped:
      return "stopped";
    case WorkerState::kStarting:
      return "starting";
    case WorkerState::kReady:
      return "ready";
    case WorkerState::kBusy:
      return "busy";
    case WorkerState::kFailed:
      return "failed";
  }
  return "unknown";
}

struct WorkerJob {
  std::string job_id;
  // The canonical job spec (model/job_spec.h); the worker fills in scratch_dir and cache_dir.
  Json spec;
  std::chrono::milliseconds timeout{120000};
  // Who submitted it (model/principal.h; "" for the anonymous principal): a worker that
  // keeps a process between jobs keeps it only for jobs of the same submitter.
  std::string submitter;
  // Whether another job of its reference may come soon. False for the last candidate of a
  // batch (a batch puts its reference's jobs together: a KernelBench run's problem has none
  // after it), whose judge is then not kept for one.
  bool reference_follows = true;
};

struct WorkerOutcome {
  enum class Kind {
    kResult,         // `result` holds kernel_exec_result (kernel failures included)
    kCancelled,      // cancelled by the client; `error` says so
    kWorkerFailure,  // the worker could not run the job at all; `error` says why
  };
  Kind kind = Kind::kResult;
  Json result;
  std::string error;
};

// Called from the worker's thread with the child's progress.
using ProgressSink =
    std::function<void(const std::string& phase, const std::string& message, double fraction)>;

class Worker {
 public:
  virtual ~Worker() = default;

  // "python" or "cuda".
  virtual std::string_view type() const = 0;

  // Starts the long-lived parts (zygote, a pre-started child) so the first job is warm.
  // Failures are logged and retried by run(); never throws.
  virtual void prepare() = 0;

  // Runs one job to completion, blocking the calling thread. Thread-compatible: one
  // caller at a time (the device's runner thread). `cancel` may be signalled from any
  // thread.
  virtual WorkerOutcome run(const WorkerJob& job, CancelToken& cancel,
                            const ProgressSink& progress) = 0;

  // Called by the same thread once run()'s result was published: work the job's answer
  // need not wait for (warming the process that replaces the one the job used).
  virtual void after_job(const WorkerJob& /*job*/) {}

  // `queued` jobs wait for this worker on its device (not yet started): a worker whose jobs
  // run side by side may warm that many processes at once, within its maximum. Thread-safe,
  // and must not block (called while a request is being accepted).
  virtual void expect_jobs(int /*queued*/) {}

  // Its state now (/health: kFailed makes the server "degraded"). Thread-safe.
  virtual WorkerState state() const = 0;

  // State for /health and /stats: {"type","state","pid","restarts","jobs_run",
  // "child_crashes","device":{...}}. Thread-safe.
  virtual Json status() const = 0;

  // Stops every process it owns. Idempotent.
  virtual void shutdown() = 0;
};

}  // namespace kforge::workers
