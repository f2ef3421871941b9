// JobService: the facade every frontend (REST, MCP, CLI) talks to. Frontends never touch
// the store, the scheduler or the workers directly.
//
// Thread-safety: all methods are thread-safe. Methods marked "blocks" may wait on disk
// I/O: call them from a thread pool, never on an io (network) thread. Callbacks run on an
// engine thread (or on the calling thread when the job is already finished): they must be
// quick and must not call back into the JobService while holding their own locks.
//
// Example (in a frontend, on a pool thread):
//   KF_ASSIGN_OR_RETURN(auto job, service.submit(std::move(request), {"peer 127.0.0.1"}));
//   auto sub = service.when_done(job.id, [](const model::JobRecord& done) { ... });
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/job.h"
#include "kforge/model/job_query.h"
#include "kforge/model/principal.h"
#include "kforge/model/request.h"

namespace kforge::jobs {

// What a running job is doing (from the worker's progress messages).
struct JobProgress {
  std::string job_id;
  std::string phase;    // "queued", "starting", "loading", "correctness", "timing_reference",
                        // "timing_candidate", "finished"
  std::string message;  // human-readable detail
  double fraction = 0;  // 0..1, monotonically increasing per job
};

// A job changed: it was accepted (queued), started or reported progress (running, with its
// phase), or ended (a terminal state). What a live listing needs to know that it is stale.
struct JobChange {
  std::string job_id;
  std::string submitter;  // the job's principal, so a listener can tell whose it is
  model::JobState state = model::JobState::kQueued;
  std::string phase;  // a running job's progress phase; "" otherwise
};

// Who submits a job. `client` keys the per-client queue quota (frontends derive it: "peer
// 10.0.0.7", "token 1a2b3c4d peer 10.0.0.7", "stdio"); `principal` is recorded as the job's
// submitter (model/principal.h): the anonymous principal on a server without tokens, and for
// work the server does on nobody's behalf.
struct Caller {
  // A client key alone is an anonymous caller. NOLINTNEXTLINE(google-explicit-constructor)
  Caller(std::string client_key = {}, model::Principal who = {})
      : client(std::move(client_key)), principal(std::move(who)) {}
  // NOLINTNEXTLINE(google-explicit-constructor): a literal client key ("stdio").
  Caller(const char* client_key) : Caller(std::string(client_key)) {}

  std::string client;
  model::Principal principal;
  // The result can reach no one but a caller waiting in this process: a synchronous tool call
  // of `kforge mcp`, whose client (the editor that started it) ends with the process and
  // leaves no way to ask for the result later. A restart of the engine then ends the job as
  // cancelled instead of running it for no one (JobServiceImpl::start). Not for work a client
  // can fetch by id later (REST, HTTP MCP, tasks): that keeps the restart rule.
  bool process_bound = false;
};

class JobService {
 public:
  using DoneCallback = std::function<void(const model::JobRecord&)>;
  using ProgressCallback = std::function<void(const JobProgress&)>;
  using ChangeCallback = std::function<void(const JobChange&)>;

  virtual ~JobService() = default;

  // Checks the requested device and the queue limits, assigns an id and a seed (when
  // absent), persists the job (its submitter: `caller.principal.name`) and queues it. On
  // return the job is durable. Blocks. kInvalidArgument (field "device") for an unknown
  // device; kResourceExhausted when `caller.client`'s quota is used up; kUnavailable when the
  // whole queue is full or the server is shutting down. Queue errors name the limit (the flag).
  virtual StatusOr<model::JobRecord> submit(model::JobRequest request, const Caller& caller) = 0;

  // The job as it is now, whoever submitted it (frontends answer clients through
  // job_access.h, which hides other principals' jobs); kNotFound when unknown. Blocks.
  virtual StatusOr<model::JobRecord> get(const std::string& id) = 0;

  // The jobs `query` selects, newest first (model/job_query.h), whoever submitted them
  // (frontends narrow `query.submitter` to what the caller may see: job_access.h); a running
  // job carries its progress phase. kUnimplemented where a service cannot list (one that
  // forwards to another server). Blocks.
  virtual StatusOr<std::vector<model::JobRecord>> list_jobs(const model::JobQuery& query) {
    (void)query;
    return Status(ErrorCode::kUnimplemented, "this service cannot list jobs");
  }

  // Calls `done` once when the job reaches a terminal state: immediately (on this thread)
  // if it already has. Returns a subscription id for `unsubscribe`. kNotFound when unknown.
  // Blocks (may read the store).
  virtual StatusOr<uint64_t> when_done(const std::string& id, DoneCallback done) = 0;

  // Calls `progress` for every progress event of a queued or running job until it is
  // terminal. kNotFound when the job is unknown, kFailedPrecondition when it has finished.
  virtual StatusOr<uint64_t> on_progress(const std::string& id, ProgressCallback progress) = 0;

  // Calls `changed` for every change of every job this service runs, from now on, until
  // unsubscribed (GET /jobs/events). kUnimplemented where a service cannot (one that forwards
  // to another server, or whose jobs other nodes run).
  // NOLINTNEXTLINE(performance-unnecessary-value-param): a sink; implementations keep it.
  virtual StatusOr<uint64_t> on_job_changes(ChangeCallback /*changed*/) {
    return Status(ErrorCode::kUnimplemented, "this service does not report job changes");
  }

  // Drops a subscription made by when_done/on_progress/on_job_changes; unknown ids are ignored.
  virtual void unsubscribe(uint64_t subscription) = 0;

  // Cancels a queued or running job (a running job's process group is killed). Returns OK
  // if the job is cancelled or already terminal; kNotFound when unknown. Blocks.
  virtual Status cancel(const std::string& id, const std::string& reason) = 0;

  // Operational counters: queue depth, jobs by state, per-device utilisation and current
  // job, worker restarts, uptime. Blocks (reads the store).
  virtual Json stats() = 0;

  // Liveness and the devices with their worker state; never blocks on the store.
  virtual Json health() = 0;

  // The operational metrics in the Prometheus text format (GET /metrics; served as
  // kPrometheusContentType, jobs/prometheus_text.h). kUnimplemented where a service has
  // none (e.g. one that forwards to another server). Blocks (reads the store).
  virtual StatusOr<std::string> prometheus_metrics() {
    return Status(ErrorCode::kUnimplemented, "this service exports no metrics");
  }

  // Deletes finished jobs that finished more than `older_than` ago; returns the count.
  // Blocks.
  virtual StatusOr<int64_t> cleanup(std::chrono::seconds older_than) = 0;
};

}  // namespace kforge::jobs
