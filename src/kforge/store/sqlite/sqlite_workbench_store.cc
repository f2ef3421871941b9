#include "kforge/store/sqlite/sqlite_workbench_store.h"

#include <sqlite3.h>

#include <charconv>
#include <functional>
#include <string>

#include "kforge/store/sqlite/sqlite_store.h"
#include "kforge/store/sqlite/sqlite_support.h"

namespace kforge::store {

using sqlite_support::Call;
using sqlite_support::column_text;
using sqlite_support::dump_json;
using sqlite_support::exec;
using sqlite_support::query_text;
using sqlite_support::sqlite_status;

namespace {

constexpr int kWorkbenchSchema = 2;  // the first schema version with the workbench tables

using Statement = std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)>;

StatusOr<Statement> prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &raw, nullptr);
  if (rc != SQLITE_OK) return sqlite_status(db, rc, "prepare " + sql);
  return Statement(raw, &sqlite3_finalize);
}

// Runs `body` inside BEGIN IMMEDIATE ... COMMIT; rolls back when it fails.
Status in_transaction(sqlite3* db, const std::function<Status()>& body) {
  KF_RETURN_IF_ERROR(exec(db, "BEGIN IMMEDIATE", "begin transaction"));
  Status status = body();
  if (status.is_ok()) status = exec(db, "COMMIT", "commit");
  if (!status.is_ok()) exec(db, "ROLLBACK", "roll back").ignore();
  return status;
}

StatusOr<Json> json_column(sqlite3_stmt* stmt, int col, const std::string& what) {
  StatusOr<Json> value = parse_json(column_text(stmt, col));
  if (!value.is_ok()) return internal_error(what + ": corrupted JSON: " + value.status().message());
  return value;
}

constexpr const char* kSelectSession =
    "SELECT id, kernel_name, state, workspace, data, created_ms, updated_ms "
    "FROM workbench_sessions";

StatusOr<WorkbenchSessionRecord> decode_session(sqlite3_stmt* stmt) {
  WorkbenchSessionRecord s;
  s.id = column_text(stmt, 0);
  s.kernel_name = column_text(stmt, 1);
  s.state = column_text(stmt, 2);
  s.workspace = column_text(stmt, 3);
  KF_ASSIGN_OR_RETURN(s.data, json_column(stmt, 4, "workbench session " + s.id));
  s.created_ms = sqlite3_column_int64(stmt, 5);
  s.updated_ms = sqlite3_column_int64(stmt, 6);
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<SqliteWorkbenchStore>> SqliteWorkbenchStore::open(const Options& options) {
  // The job store creates or migrates the schema (and refuses one newer than this binary).
  KF_RETURN_IF_ERROR(
      SqliteStore::open({.path = options.path, .busy_timeout_ms = options.busy_timeout_ms})
          .status());
  const std::string where = options.path.string();
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(where.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status status = sqlite_status(db, rc, "open " + where);
    sqlite3_close(db);
    return status;
  }
  std::unique_ptr<SqliteWorkbenchStore> store(new SqliteWorkbenchStore(db));
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, options.busy_timeout_ms);
  KF_RETURN_IF_ERROR(exec(db, "PRAGMA synchronous=FULL", where));
  KF_RETURN_IF_ERROR(exec(db, "PRAGMA foreign_keys=ON", where));
  KF_ASSIGN_OR_RETURN(std::string version, query_text(db, "PRAGMA user_version"));
  int schema = 0;
  const auto [end, err] = std::from_chars(version.data(), version.data() + version.size(), schema);
  if (err != std::errc() || end != version.data() + version.size() || schema < kWorkbenchSchema) {
    return failed_precondition(where + ": schema version " + version + " has no workbench tables");
  }
  return store;
}

SqliteWorkbenchStore::~SqliteWorkbenchStore() {
  MutexLock lock(mu_);
  sqlite3_close_v2(db_);
}

Status SqliteWorkbenchStore::insert_session(const WorkbenchSessionRecord& s) {
  if (s.id.empty()) return invalid_argument("workbench session id is empty", "id");
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(Statement stmt,
                      prepare(db_,
                              "INSERT INTO workbench_sessions (id, kernel_name, state, workspace, "
                              "data, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?)"));
  return Call(db_, stmt.get())
      .text(s.id)
      .text(s.kernel_name)
      .text(s.state)
      .text(s.workspace)
      .text(dump_json(s.data))
      .integer(s.created_ms)
      .integer(s.updated_ms)
      .run("insert workbench session " + s.id);
}

Status SqliteWorkbenchStore::update_session(const WorkbenchSessionRecord& s) {
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(Statement stmt,
                      prepare(db_,
                              "UPDATE workbench_sessions SET kernel_name = ?, state = ?, data = ?, "
                              "updated_ms = ? WHERE id = ?"));
  KF_RETURN_IF_ERROR(Call(db_, stmt.get())
                         .text(s.kernel_name)
                         .text(s.state)
                         .text(dump_json(s.data))
                         .integer(s.updated_ms)
                         .text(s.id)
                         .run("update workbench session " + s.id));
  if (sqlite3_changes(db_) == 0) return not_found("unknown workbench session " + s.id);
  return Status::ok();
}

StatusOr<std::optional<WorkbenchSessionRecord>> SqliteWorkbenchStore::get_session(
    const std::string& id) {
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(Statement stmt, prepare(db_, std::string(kSelectSession) + " WHERE id = ?"));
  Call call(db_, stmt.get());
  call.text(id);
  KF_ASSIGN_OR_RETURN(bool row, call.step("get workbench session " + id));
  if (!row) return std::optional<WorkbenchSessionRecord>();
  KF_ASSIGN_OR_RETURN(WorkbenchSessionRecord s, decode_session(stmt.get()));
  return std::optional<WorkbenchSessionRecord>(std::move(s));
}

StatusOr<std::vector<WorkbenchSessionRecord>> SqliteWorkbenchStore::recent_sessions(int limit) {
  WorkbenchSessionQuery query;
  query.limit = limit;
  return list_sessions(query);
}

StatusOr<std::vector<WorkbenchSessionRecord>> SqliteWorkbenchStore::list_sessions(
    const WorkbenchSessionQuery& query) {
  std::string sql = std::string(kSelectSession) + " WHERE 1 = 1";
  if (!query.states.empty()) {
    sql += " AND state IN (?";
    for (size_t i = 1; i < query.states.size(); ++i)
      sql += ", ?";
    sql += ")";
  }
  if (query.kernel_name) sql += " AND kernel_name = ?";
  if (query.owner) sql += " AND COALESCE(json_extract(data, '$.owner'), '') = ?";
  if (query.after_updated_ms) sql += " AND (updated_ms < ? OR (updated_ms = ? AND id < ?))";
  sql += " ORDER BY updated_ms DESC, id DESC LIMIT ?";
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(Statement stmt, prepare(db_, sql));
  Call call(db_, stmt.get());
  for (const std::string& state : query.states)
    call.text(state);
  if (query.kernel_name) call.text(*query.kernel_name);
  if (query.owner) call.text(*query.owner);
  if (query.after_updated_ms) {
    call.integer(*query.after_updated_ms).integer(*query.after_updated_ms).text(query.after_id);
  }
  call.integer(query.limit);
  std::vector<WorkbenchSessionRecord> out;
  while (true) {
    KF_ASSIGN_OR_RETURN(bool row, call.step("list workbench sessions"));
    if (!row) return out;
    KF_ASSIGN_OR_RETURN(WorkbenchSessionRecord s, decode_session(stmt.get()));
    out.push_back(std::move(s));
  }
}

Status SqliteWorkbenchStore::insert_version(const WorkbenchVersionRecord& v) {
  MutexLock lock(mu_);
  return in_transaction(db_, [&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    KF_ASSIGN_OR_RETURN(Statement exists,
                        prepare(db_, "SELECT 1 FROM workbench_sessions WHERE id = ?"));
    Call check(db_, exists.get());
    check.text(v.session_id);
    KF_ASSIGN_OR_RETURN(bool found, check.step("find workbench session " + v.session_id));
    if (!found) return not_found("unknown workbench session " + v.session_id);
    KF_ASSIGN_OR_RETURN(Statement stmt,
                        prepare(db_,
                                "INSERT INTO workbench_versions (session_id, version, file, "
                                "source, results, created_ms) VALUES (?, ?, ?, ?, ?, ?)"));
    return Call(db_, stmt.get())
        .text(v.session_id)
        .integer(v.version)
        .text(v.file)
        .text(v.source)
        .text(dump_json(v.results))
        .integer(v.created_ms)
        .run("insert version " + std::to_string(v.version) + " of workbench session " +
             v.session_id);
  });
}

Status SqliteWorkbenchStore::update_version_results(const std::string& session_id, int version,
                                                    const Json& results) {
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(
      Statement stmt,
      prepare(db_,
              "UPDATE workbench_versions SET results = ? WHERE session_id = ? AND version = ?"));
  const std::string what =
      "version " + std::to_string(version) + " of workbench session " + session_id;
  KF_RETURN_IF_ERROR(Call(db_, stmt.get())
                         .text(dump_json(results))
                         .text(session_id)
                         .integer(version)
                         .run("update results of " + what));
  if (sqlite3_changes(db_) == 0) return not_found("unknown " + what);
  return Status::ok();
}

StatusOr<std::vector<WorkbenchVersionRecord>> SqliteWorkbenchStore::versions(
    const std::string& session_id) {
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(Statement stmt,
                      prepare(db_,
                              "SELECT session_id, version, file, source, results, created_ms "
                              "FROM workbench_versions WHERE session_id = ? ORDER BY version"));
  Call call(db_, stmt.get());
  call.text(session_id);
  std::vector<WorkbenchVersionRecord> out;
  while (true) {
    KF_ASSIGN_OR_RETURN(bool row, call.step("list versions of workbench session " + session_id));
    if (!row) return out;
    WorkbenchVersionRecord v;
    v.session_id = column_text(stmt.get(), 0);
    v.version = sqlite3_column_int(stmt.get(), 1);
    v.file = column_text(stmt.get(), 2);
    v.source = column_text(stmt.get(), 3);
    KF_ASSIGN_OR_RETURN(v.results,
                        json_column(stmt.get(), 4, "workbench version of " + session_id));
    v.created_ms = sqlite3_column_int64(stmt.get(), 5);
    out.push_back(std::move(v));
  }
}

}  // namespace kforge::store
