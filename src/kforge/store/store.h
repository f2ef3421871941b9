// Durable storage of jobs and results. Implementations: store/sqlite (default, embedded),
// store/postgres (several nodes sharing one queue: shared_queue.h).
//
// Thread-safety: every method may be called from any thread; implementations serialise
// internally. Methods block on disk I/O: never call them on an io (network) thread.
// A job written by `insert_job` survives a crash of the process (SIGKILL) once the call
// returned OK.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/model/job.h"
#include "kforge/model/job_query.h"

namespace kforge::store {

class SharedQueue;

class Store {
 public:
  virtual ~Store() = default;

  // The queue this store shares with other nodes, or null when it serves one process.
  virtual SharedQueue* shared_queue() { return nullptr; }

  // Inserts a new job; kAlreadyExists if the id is taken.
  virtual Status insert_job(const model::JobRecord& job) = 0;

  // queued -> running: records the device, start time and increments attempts.
  virtual Status mark_running(const std::string& id, const std::string& device,
                              int64_t started_ms) = 0;

  // running|queued -> queued (after a restart), keeping attempts.
  virtual Status requeue(const std::string& id) = 0;

  // Records a terminal state with its result (may be null) and error text.
  virtual Status finish_job(const std::string& id, model::JobState state, const Json& result,
                            const std::string& error, int64_t finished_ms) = 0;

  // The job, or nullopt when unknown.
  virtual StatusOr<std::optional<model::JobRecord>> get_job(const std::string& id) = 0;

  // The jobs `query` selects, newest first (model/job_query.h), at most `query.limit` of them,
  // each with only what a listing shows (a page stays small however large the results):
  // `request` is {"kernel": {"kernel_type": <the candidate's, or null>}} and `result` (null
  // while there is none) holds only `compiled`, `correctness`, `runtime`, `runtime_stats`,
  // `speedup`, `speedup_verdict` and `error_kind` (null where the result has none).
  // kInvalidArgument (field "limit") for a limit below 1.
  virtual StatusOr<std::vector<model::JobRecord>> list_jobs(const model::JobQuery& query) = 0;

  // Every job in state queued or running, oldest first (for recovery at start-up).
  virtual StatusOr<std::vector<model::JobRecord>> unfinished_jobs() = 0;

  // Deletes finished jobs (success/failed/cancelled) that finished before `unix_ms`;
  // returns how many were deleted.
  virtual StatusOr<int64_t> delete_finished_before(int64_t unix_ms) = 0;

  // Number of jobs per state.
  virtual StatusOr<std::map<model::JobState, int64_t>> count_by_state() = 0;

  // Number of jobs per state and the sum of their created_ms (for average ages).
  struct StateSummary {
    int64_t count = 0;
    int64_t created_ms_sum = 0;
  };
  virtual StatusOr<std::map<model::JobState, StateSummary>> job_summary() = 0;
};

}  // namespace kforge::store
