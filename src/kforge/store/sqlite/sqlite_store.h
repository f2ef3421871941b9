// SQLite implementation of `Store`: one embedded database file, one connection.
//
// Schema (version kept in `PRAGMA user_version`; see `schema_version()`):
//   jobs(id          TEXT PRIMARY KEY,
//        kind        TEXT NOT NULL,      -- model::to_string(JobKind): "evaluate" | "compare"
//        state       TEXT NOT NULL,      -- model::to_string(JobState): "queued", "running", ...
//        request     TEXT NOT NULL,      -- canonical request, JSON text
//        result      TEXT,               -- JSON text; NULL while the result is null
//        device      TEXT NOT NULL,
//        error       TEXT NOT NULL,
//        attempts    INTEGER NOT NULL,
//        created_ms  INTEGER NOT NULL,   -- Unix ms
//        started_ms  INTEGER NOT NULL,   -- 0 until started
//        finished_ms INTEGER NOT NULL)   -- 0 until finished
//   indexes: jobs_by_state(state, created_ms), jobs_by_finished(finished_ms).
//   Version 2 adds the workbench tables (sqlite_workbench_store.h), version 3
//   jobs.submitter TEXT (model/principal.h), version 4 jobs.process_bound INTEGER (0 or 1:
//   model::JobRecord::process_bound), version 5 the index jobs_by_created(created_ms, id) of
//   job listings.
// Migrations are a table in sqlite_store.cc: entry i takes user_version i to i + 1 and runs
// in one transaction at `open`. A database newer than this binary is refused.
//
// Durability: `journal_mode=WAL`, and `synchronous=FULL` by default: every mutating call is
// one transaction, written and fsynced to the WAL file before the call returns OK, so it
// survives SIGKILL of the process and power loss. With Synchronous::kNormal the fsync is
// skipped: SIGKILL still loses nothing, an OS crash or power loss may lose the last commits
// (never corrupting the file). FULL costs one fsync per call (docs/benchmarks.md).
//
// Thread-safety: all methods may be called concurrently; one mutex serialises them. Other
// processes may open the same file (WAL readers, `busy_timeout_ms` for writers).
//
// Example:
//   KF_ASSIGN_OR_RETURN(auto store, SqliteStore::open({.path = data_dir / "kforge.db"}));
//   KF_RETURN_IF_ERROR(store->insert_job(job));
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "kforge/common/thread_annotations.h"
#include "kforge/store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kforge::store {

class SqliteStore final : public Store {
 public:
  enum class Synchronous { kFull, kNormal };  // SQLite's `PRAGMA synchronous`

  struct Options {
    std::filesystem::path path;  // database file; missing parent directories are created
    int busy_timeout_ms = 5000;  // how long a write waits for another process's lock
    Synchronous synchronous = Synchronous::kFull;
  };

  // Opens (creating if needed) the database, enables WAL and migrates the schema.
  // Errors: kIo when the file cannot be created or opened, kFailedPrecondition when the
  // schema is newer than this binary or WAL cannot be enabled, kInternal otherwise.
  static StatusOr<std::unique_ptr<SqliteStore>> open(const Options& options);

  // The schema version this binary creates and understands.
  static int schema_version();

  // The connection's `PRAGMA synchronous`, read back from SQLite.
  StatusOr<Synchronous> synchronous();

  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  // kAlreadyExists when the id is taken, kInvalidArgument for an empty id. Any state may be
  // inserted as it is (the record is stored verbatim).
  Status insert_job(const model::JobRecord& job) override;
  // kNotFound for an unknown id, kFailedPrecondition unless the job is queued.
  Status mark_running(const std::string& id, const std::string& device,
                      int64_t started_ms) override;
  // A running job becomes queued (device, started_ms and attempts are kept); a queued job is
  // left as it is. kNotFound for an unknown id, kFailedPrecondition for a terminal job.
  Status requeue(const std::string& id) override;
  // kInvalidArgument unless `state` is terminal; kNotFound for an unknown id;
  // kFailedPrecondition when the job is already terminal or cannot move to `state`
  // (model::can_transition). A null `result` is stored as SQL NULL.
  Status finish_job(const std::string& id, model::JobState state, const Json& result,
                    const std::string& error, int64_t finished_ms) override;
  // A row that cannot be decoded (bad JSON, unknown state or kind) is kInternal naming the id.
  StatusOr<std::optional<model::JobRecord>> get_job(const std::string& id) override;
  // Newest first (model/job_query.h); the candidate's kernel_type is read from the request.
  StatusOr<std::vector<model::JobRecord>> list_jobs(const model::JobQuery& query) override;
  // Oldest first by created_ms, ties in insertion order.
  StatusOr<std::vector<model::JobRecord>> unfinished_jobs() override;
  StatusOr<int64_t> delete_finished_before(int64_t unix_ms) override;
  // Every state is present in the map, with 0 when no job is in it.
  StatusOr<std::map<model::JobState, int64_t>> count_by_state() override;
  // Every state is present in the map, with zeros when no job is in it.
  StatusOr<std::map<model::JobState, StateSummary>> job_summary() override;

 private:
  enum class Query : int;  // the cached statements; defined in sqlite_store.cc

  explicit SqliteStore(sqlite3* db);

  Status migrate() REQUIRES(mu_);
  Status prepare_statements() REQUIRES(mu_);
  sqlite3_stmt* statement(Query q) REQUIRES(mu_);
  // Runs `body` inside BEGIN IMMEDIATE ... COMMIT; rolls back when it fails.
  Status in_transaction(const std::function<Status()>& body) REQUIRES(mu_);
  // The state of job `id`, or kNotFound.
  StatusOr<model::JobState> state_of(const std::string& id) REQUIRES(mu_);

  Mutex mu_;
  sqlite3* db_ GUARDED_BY(mu_);                            // owned, closed by the destructor
  std::vector<sqlite3_stmt*> statements_ GUARDED_BY(mu_);  // owned, indexed by Query
};

}  // namespace kforge::store
