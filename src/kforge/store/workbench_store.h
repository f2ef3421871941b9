// Durable storage of Triton workbench sessions (workbench/) and their kernel versions.
// Implementation: store/sqlite/sqlite_workbench_store.h, in the same database file as the jobs
// when their store is SQLite (its tables come from the same migration list), in a file of its own
// when it is PostgreSQL: the sessions' workspace files are on one node's disk.
//
// A session row holds what identifies it (id, kernel name, state, workspace directory) as
// columns and everything else the workbench keeps about it (settings, context accounting,
// notes) as one JSON object, which the workbench owns and versions itself. Versions are
// append-only: a version's source is written once and never replaced; only its results grow.
//
// Thread-safety: every method may be called from any thread; implementations serialise
// internally. Methods block on disk I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::store {

struct WorkbenchSessionRecord {
  std::string id;
  std::string kernel_name;  // "" until set_kernel_name
  std::string state;        // "start" | "write" | "evaluation" | "end"
  std::string workspace;    // absolute directory of the session's files
  Json data = Json::object();
  int64_t created_ms = 0;  // Unix ms
  int64_t updated_ms = 0;
};

struct WorkbenchVersionRecord {
  std::string session_id;
  int version = 0;                // 1, 2, ...
  std::string file;               // path of the version's file, relative to the workspace
  std::string source;             // the kernel source as written
  Json results = Json::object();  // what the execution tools found (workbench-defined)
  int64_t created_ms = 0;
};

// Which sessions list_sessions returns: the most recently updated first (ties by id,
// descending); every given filter must hold; `after_*` continues a listing after that session.
struct WorkbenchSessionQuery {
  std::vector<std::string> states{};          // any of these; empty: every state
  std::optional<std::string> kernel_name{};   // exactly this name
  std::optional<std::string> owner{};         // sessions of this principal ("" for unowned ones)
  std::optional<int64_t> after_updated_ms{};  // with after_id: the last session of a page
  std::string after_id{};
  int limit = 20;  // >= 1
};

class WorkbenchStore {
 public:
  virtual ~WorkbenchStore() = default;

  // kAlreadyExists when the id is taken.
  virtual Status insert_session(const WorkbenchSessionRecord& session) = 0;
  // Replaces the row's kernel_name, state, data and updated_ms; kNotFound when unknown.
  virtual Status update_session(const WorkbenchSessionRecord& session) = 0;
  // nullopt when unknown.
  virtual StatusOr<std::optional<WorkbenchSessionRecord>> get_session(const std::string& id) = 0;
  // The most recently updated sessions first (ties by id, descending), at most `limit`.
  virtual StatusOr<std::vector<WorkbenchSessionRecord>> recent_sessions(int limit) = 0;
  // The sessions `query` selects, in its order.
  virtual StatusOr<std::vector<WorkbenchSessionRecord>> list_sessions(
      const WorkbenchSessionQuery& query) = 0;

  // kAlreadyExists when the session already has this version number, kNotFound when the
  // session is unknown.
  virtual Status insert_version(const WorkbenchVersionRecord& version) = 0;
  // Replaces a version's results; kNotFound when unknown.
  virtual Status update_version_results(const std::string& session_id, int version,
                                        const Json& results) = 0;
  // Every version of a session, by version number.
  virtual StatusOr<std::vector<WorkbenchVersionRecord>> versions(const std::string& session_id) = 0;
};

}  // namespace kforge::store
