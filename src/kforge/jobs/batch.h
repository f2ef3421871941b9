// Batches of compares (`POST /batch`, the MCP tool batch_compare): one reference, N
// candidates, each candidate an ordinary compare job with its own id. The jobs share one seed
// (so they are judged on the same inputs, and the reference's results are computed once per
// batch: reference_reuse.h) and carry their place in the batch in their stored request.
//
// BatchBook remembers which jobs make up each batch, for GET /batch/{id}: in memory, the most
// recent `capacity` batches (the jobs themselves are durable in the store; a batch id does not
// survive a restart, its job ids do).
//
// Thread-safety: BatchBook's methods are thread-safe; submit_batch blocks (it submits).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/jobs/job_service.h"
#include "kforge/model/batch.h"

namespace kforge::jobs {

struct BatchRecord {
  std::string id;
  std::vector<std::string> job_ids;  // in the candidates' order
  int64_t created_ms = 0;
  double timeout_s = 0;  // the longest job timeout (bounds a client's wait)
  // The principal that submitted it (model/principal.h): GET /batch/{id} shows it to that
  // principal (and admins) only.
  std::string submitter;
};

class BatchBook {
 public:
  explicit BatchBook(size_t capacity = 4096) : capacity_(capacity) {}
  void add(BatchRecord batch);
  std::optional<BatchRecord> get(const std::string& id) const;

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  std::map<std::string, BatchRecord> batches_ GUARDED_BY(mu_);
  std::deque<std::string> order_ GUARDED_BY(mu_);  // oldest first
};

// Submits every job of `batch` (one seed for all: the request's, else one drawn here), in
// order, as `caller`, and records the batch in `book` (when not null). If a submit is refused
// (quota, full queue), the jobs already submitted are cancelled and the error is returned,
// naming the candidate. Blocks.
StatusOr<BatchRecord> submit_batch(JobService& service, BatchBook* book, model::BatchRequest batch,
                                   const Caller& caller);

// Watches every job of a batch until the last has finished or end() is called (REST and MCP
// wait for batches through it). `on_job` runs once per job as it finishes, with its result
// view (job_result_view) and how many have finished so far: under the watch's lock, so the
// calls are in order and never concurrent (it must be quick and must not call the watch).
// `on_all` runs once, after the last job, with every view in the batch's order; not after
// end(). The JobService's callbacks keep the watch alive until then: whoever else holds it
// (a cancel hook) should hold it weakly.
class BatchWatch : public std::enable_shared_from_this<BatchWatch> {
 public:
  using OnJob = std::function<void(size_t index, const model::JobRecord& job, const Json& view,
                                   size_t finished)>;
  using OnAll = std::function<void(Json views)>;

  static std::shared_ptr<BatchWatch> start(JobService& service, const BatchRecord& batch,
                                           OnJob on_job, OnAll on_all);
  // Stops watching and drops the subscriptions; true for the call that ended the watch.
  bool end();

  BatchWatch(JobService& service, size_t size, OnJob on_job, OnAll on_all)
      : service_(service),
        on_job_(std::move(on_job)),
        on_all_(std::move(on_all)),
        views_(size, Json()) {}

 private:
  void finished(size_t index, const model::JobRecord& job);

  JobService& service_;
  const OnJob on_job_;
  const OnAll on_all_;
  Mutex mu_;
  std::vector<Json> views_ GUARDED_BY(mu_);  // null until the job finished
  size_t finished_ GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> subs_ GUARDED_BY(mu_);
  bool ended_ GUARDED_BY(mu_) = false;
};

// Every job of a batch as it is now: {batch_id, state ("running" until every job is
// terminal, then "finished"), total, finished, jobs: [{index, job_id, state}], results:
// [job_result_view of each finished job, null for the others]}. Blocks (reads the store).
Json batch_view(JobService& service, const BatchRecord& batch);

}  // namespace kforge::jobs
