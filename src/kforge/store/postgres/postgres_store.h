// PostgreSQL implementation of `Store` and `SharedQueue`: one database shared by several
// `kforge serve` nodes (store/shared_queue.h says how they share the queue).
//
// Schema (version in `kforge_schema_version`; migrations are a list in postgres_store.cc,
// applied at `open` in one transaction under an advisory lock, so nodes starting together
// migrate once):
//   jobs(seq bigserial, id text PRIMARY KEY, kind, state, request, result, device, error,
//        attempts, created_ms, started_ms, finished_ms   -- as the SQLite store's columns
//        owner text,               -- node running the job (NULL unless running)
//        lease_until timestamptz,  -- the owner's lease, by the database's clock
//        cancel_reason text)       -- a cancellation requested by another node
//   indexes: jobs_by_created(created_ms, id) for job listings (version 3), and the queue's.
//   job_runs(job_id, attempt, node, device, claimed_ms, ended_ms, outcome): one row per
//        start; outcome is the terminal state the node recorded, 'requeued' (the node
//        stopped), 'lease_expired' (the node died), NULL while it runs.
// Leases are measured by the database server's clock, so the nodes' clocks need not agree.
// Events travel on the channel `kforge_jobs` as "queued:<id>", "done:<id>", "cancel:<id>".
//
// Durability: every mutating call is one transaction, committed (with the server's own
// `synchronous_commit`) before it returns OK.
//
// Thread-safety: one connection serialised by a mutex serves every call except
// `wait_events`, which has its own listening connection. A lost connection is re-established
// by the next call (which fails with kUnavailable when it cannot).
//
// Example:
//   KF_ASSIGN_OR_RETURN(auto store, PostgresStore::open({.conninfo = "postgresql:///kforge",
//                                                        .node_id = "node-a"}));
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "kforge/common/thread_annotations.h"
#include "kforge/store/shared_queue.h"
#include "kforge/store/store.h"

namespace kforge::store {

namespace pg {
class Connection;
}

class PostgresStore final : public Store, public SharedQueue {
 public:
  struct Options {
    std::string conninfo;  // "postgresql://user@host:5432/db" or "host=... dbname=..."
    std::string node_id;   // owner name of the jobs this node claims; must not be empty
    std::chrono::milliseconds lease{30000};  // how long a claim lasts without a heartbeat
  };

  // Connects (twice: queries and LISTEN) and migrates the schema. kInvalidArgument for a
  // malformed connection string or an empty node id, kUnavailable when the server cannot be
  // reached, kFailedPrecondition when the schema is newer than this binary.
  static StatusOr<std::unique_ptr<PostgresStore>> open(const Options& options);
  // The schema version this binary creates and understands.
  static int schema_version();

  ~PostgresStore() override;

  SharedQueue* shared_queue() override { return this; }

  // Store (the same contract as SqliteStore; finish_job of a running job also requires that
  // this node owns it: kFailedPrecondition naming the owner otherwise).
  Status insert_job(const model::JobRecord& job) override;
  Status mark_running(const std::string& id, const std::string& device,
                      int64_t started_ms) override;
  Status requeue(const std::string& id) override;
  Status finish_job(const std::string& id, model::JobState state, const Json& result,
                    const std::string& error, int64_t finished_ms) override;
  StatusOr<std::optional<model::JobRecord>> get_job(const std::string& id) override;
  StatusOr<std::vector<model::JobRecord>> list_jobs(const model::JobQuery& query) override;
  StatusOr<std::vector<model::JobRecord>> unfinished_jobs() override;
  StatusOr<int64_t> delete_finished_before(int64_t unix_ms) override;
  StatusOr<std::map<model::JobState, int64_t>> count_by_state() override;
  StatusOr<std::map<model::JobState, StateSummary>> job_summary() override;

  // SharedQueue
  const std::string& node_id() const override { return options_.node_id; }
  StatusOr<std::optional<model::JobRecord>> claim(const std::vector<std::string>& targets,
                                                  const std::string& device,
                                                  int64_t started_ms) override;
  StatusOr<std::vector<CancelRequest>> heartbeat(const std::vector<std::string>& running) override;
  StatusOr<int64_t> recover_expired(int max_attempts, int64_t now_ms) override;
  StatusOr<int64_t> recover_own(int max_attempts, int64_t now_ms) override;
  StatusOr<std::vector<std::string>> finished_among(const std::vector<std::string>& ids) override;
  StatusOr<bool> request_cancel(const std::string& id, const std::string& reason,
                                int64_t now_ms) override;
  StatusOr<Events> wait_events(std::chrono::milliseconds timeout) override;

 private:
  PostgresStore(Options options, std::unique_ptr<pg::Connection> conn);
  Status migrate() REQUIRES(mu_);
  Status listen() REQUIRES(listen_mu_);  // (re)connects the listener and LISTENs
  std::string lease_seconds() const;
  // Requeues (or fails, past max_attempts) the running jobs `where` selects (SQL on jobs).
  StatusOr<int64_t> recover(const std::string& where, const std::vector<std::string>& params,
                            int max_attempts, int64_t now_ms, const std::string& why) EXCLUDES(mu_);

  const Options options_;
  Mutex mu_;
  std::unique_ptr<pg::Connection> conn_ GUARDED_BY(mu_);
  Mutex listen_mu_;
  std::unique_ptr<pg::Connection> listener_ GUARDED_BY(listen_mu_);  // null until listening
};

}  // namespace kforge::store
