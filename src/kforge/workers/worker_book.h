// The state and counters a worker reports in status() (/health, /stats, /metrics), kept
// the same way by both workers (PythonWorker, NativeCudaWorker) and their WarmPool:
// processes started, restarts, jobs run, crashes, timeouts, the last warm-up, the last
// error. Also the two steps of a job both workers share: the job message (the scratch and
// cache directories come from the process's ChildSandbox, their one owner) and the
// outcome of a finished job.
//
// Thread-safe: the runner thread writes, status() readers on any thread read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "kforge/common/json.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/workers/child_channel.h"
#include "kforge/workers/worker.h"

namespace kforge::workers {

class WorkerBook {
 public:
  struct Counters {
    int64_t processes_started = 0;  // job processes started (forked or launched)
    int64_t restarts = 0;           // long-lived parts (a zygote) and processes started again
                                    // because one died before it was ready
    int64_t jobs_run = 0;
    int64_t child_crashes = 0;  // processes that died without a result (before or in a job)
    int64_t timeouts = 0;
  };

  void set_state(WorkerState state, std::string error = {});
  WorkerState state() const;
  void note_error(std::string error);
  void note_started();
  void note_restart();
  // A process that died (or failed) before it was ready.
  void note_lost_before_ready(const std::string& why);
  // The facts of a process's `ready` message (device, warm-up times and errors).
  void note_ready(const Json& ready_message);
  // Counts a finished job by how it ended, and sets the state back to `after`.
  void note_job_end(ChildJobEnd::Kind kind, WorkerState after);
  Counters counters() const;

  // Adds state, counters, warm-up facts and last_error to a worker's status object.
  void fill_status(Json& status) const;

 private:
  mutable Mutex mu_;
  WorkerState state_ GUARDED_BY(mu_) = WorkerState::kStopped;
  std::string last_error_ GUARDED_BY(mu_);
  Counters counters_ GUARDED_BY(mu_);
  Json child_device_ GUARDED_BY(mu_) = Json();  // `device` of the last ready one
  double child_warmup_ms_ GUARDED_BY(mu_) = 0;
  Json child_warmup_steps_ GUARDED_BY(mu_) = Json::object();
  Json candidate_warmup_ GUARDED_BY(mu_);  // the ready message's `candidate`
};

// The `job` message for a process: the job spec plus its scratch directory (the process's
// ChildSandbox::judge_dir, made by SandboxPolicy: the workers never make it) and the
// kernel cache directory.
Json job_message_for(const WorkerJob& job, const ChildSandbox& sandbox,
                     const std::filesystem::path& cache_dir);

// The WorkerOutcome of a job that ran on a process (cancelled or a result; a kernel's
// crash is a result).
WorkerOutcome outcome_of(const ChildJobEnd& end, Json result);

}  // namespace kforge::workers
