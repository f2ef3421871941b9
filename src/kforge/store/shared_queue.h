// A queue shared by several `kforge serve` nodes (implemented by store/postgres). Every node
// inserts the jobs it accepts into one database; each node claims, for one of its own devices,
// the oldest queued job that device may run, holds a lease on it while it runs and renews the
// lease by heartbeat. A job whose lease ran out (its node died or lost the database) goes back
// to the queue, or fails once it has been started `max_attempts` times, as after a restart.
// Finishing a running job is fenced: only the node holding its lease may record its result,
// so a job never completes twice. Nodes learn of queued, finished and cancelled jobs through
// `wait_events` (PostgreSQL LISTEN/NOTIFY) and of everything else by polling.
//
// Thread-safety: every method may be called from any thread; `wait_events` may block one
// thread while the others make calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/model/job.h"

namespace kforge::store {

class SharedQueue {
 public:
  virtual ~SharedQueue() = default;

  // This node's identity (the owner recorded on the jobs it claims).
  virtual const std::string& node_id() const = 0;

  // Claims the oldest queued job whose requested target is one of `targets` and marks it
  // running on `device`, owned by this node, with a fresh lease; `attempts` is incremented and
  // a run is recorded. nullopt when no such job is queued. The record has no request.
  virtual StatusOr<std::optional<model::JobRecord>> claim(const std::vector<std::string>& targets,
                                                          const std::string& device,
                                                          int64_t started_ms) = 0;

  // Renews the leases of `running`, the jobs this node runs (a job it no longer runs, e.g.
  // one whose result it could not record, is left to expire and run again elsewhere).
  // Returns those whose cancellation another node requested (request_cancel), with the
  // reason.
  struct CancelRequest {
    std::string id;
    std::string reason;
  };
  virtual StatusOr<std::vector<CancelRequest>> heartbeat(
      const std::vector<std::string>& running) = 0;

  // Running jobs whose lease has expired: queued again, or failed with the reason once they
  // were started `max_attempts` times. Returns how many were recovered (either way).
  virtual StatusOr<int64_t> recover_expired(int max_attempts, int64_t now_ms) = 0;
  // The same for the jobs still recorded as running on this node's name, at its start (a
  // restarted process that kept its node id runs none of them).
  virtual StatusOr<int64_t> recover_own(int max_attempts, int64_t now_ms) = 0;

  // Those of `ids` that are finished (or no longer stored): one query for many jobs.
  virtual StatusOr<std::vector<std::string>> finished_among(
      const std::vector<std::string>& ids) = 0;

  // Cancels a job that is not running on this node: a queued job becomes cancelled at once
  // (true); a job running on another node is marked, and that node cancels it at its next
  // heartbeat or event (false). kNotFound for an unknown id; a terminal job: true.
  virtual StatusOr<bool> request_cancel(const std::string& id, const std::string& reason,
                                        int64_t now_ms) = 0;

  // What other nodes (and this one) did since the last call.
  struct Events {
    bool queued = false;                // a job was queued (claim now)
    std::vector<std::string> finished;  // ids of jobs that reached a terminal state
    std::vector<std::string> cancel;    // ids of running jobs asked to cancel
  };
  // Blocks up to `timeout` for events; an empty Events after the timeout. An error when the
  // listening connection is lost (it is re-established by the next call).
  virtual StatusOr<Events> wait_events(std::chrono::milliseconds timeout) = 0;
};

}  // namespace kforge::store
