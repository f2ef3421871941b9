// SQLite implementation of `WorkbenchStore`, on its own connection to the job store's
// database file (kforge.db of the data directory), so the workbench and the job engine never
// wait on each other's mutex; SQLite's WAL mode and busy timeout arbitrate the writes. When the
// engine's store is PostgreSQL (or jobs run on a remote server) the file is the workbench's own
// (apps/kforge/workbench_flags.h, workbench_database).
//
// Schema (created by the job store's migrations, sqlite_store.cc, version 2):
//   workbench_sessions(id TEXT PRIMARY KEY, kernel_name TEXT, state TEXT, workspace TEXT,
//                      data TEXT -- JSON, created_ms INTEGER, updated_ms INTEGER)
//   workbench_versions(session_id TEXT REFERENCES workbench_sessions(id), version INTEGER,
//                      file TEXT, source TEXT, results TEXT -- JSON, created_ms INTEGER,
//                      PRIMARY KEY (session_id, version))
// open() opens the file as a job store first, which creates or migrates the schema (and
// refuses a database newer than this binary), then opens its own connection.
//
// Durability: every mutating call is one transaction with synchronous=FULL (fsynced before
// it returns); workbench writes are a handful per tool call.
//
// Example:
//   KF_ASSIGN_OR_RETURN(auto store, SqliteWorkbenchStore::open({data_dir / "kforge.db"}));
//   KF_RETURN_IF_ERROR(store->insert_session(record));
#pragma once

#include <filesystem>
#include <memory>

#include "kforge/common/thread_annotations.h"
#include "kforge/store/workbench_store.h"

struct sqlite3;

namespace kforge::store {

class SqliteWorkbenchStore final : public WorkbenchStore {
 public:
  struct Options {
    std::filesystem::path path;  // database file; created (with parents) when missing
    int busy_timeout_ms = 5000;
  };

  // kIo when the file cannot be opened, kFailedPrecondition for a schema this binary does not
  // know, kInternal otherwise.
  static StatusOr<std::unique_ptr<SqliteWorkbenchStore>> open(const Options& options);

  ~SqliteWorkbenchStore() override;
  SqliteWorkbenchStore(const SqliteWorkbenchStore&) = delete;
  SqliteWorkbenchStore& operator=(const SqliteWorkbenchStore&) = delete;

  Status insert_session(const WorkbenchSessionRecord& session) override;
  Status update_session(const WorkbenchSessionRecord& session) override;
  StatusOr<std::optional<WorkbenchSessionRecord>> get_session(const std::string& id) override;
  StatusOr<std::vector<WorkbenchSessionRecord>> recent_sessions(int limit) override;
  StatusOr<std::vector<WorkbenchSessionRecord>> list_sessions(
      const WorkbenchSessionQuery& query) override;
  Status insert_version(const WorkbenchVersionRecord& version) override;
  Status update_version_results(const std::string& session_id, int version,
                                const Json& results) override;
  StatusOr<std::vector<WorkbenchVersionRecord>> versions(const std::string& session_id) override;

 private:
  explicit SqliteWorkbenchStore(sqlite3* db) : db_(db) {}

  Mutex mu_;
  sqlite3* db_ GUARDED_BY(mu_);  // owned
};

}  // namespace kforge::store
