#include "kforge/store/sqlite/sqlite_store.h"

#include <sqlite3.h>

#include <charconv>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

#include "kforge/common/files.h"
#include "kforge/common/json.h"
#include "kforge/store/job_query_sql.h"
#include "kforge/store/sqlite/sqlite_support.h"
#include "kforge/store/summary.h"

namespace kforge::store {

using model::JobRecord;
using model::JobState;

// Cached statements; kCount is their number, not a statement.
enum class SqliteStore::Query : int {
  kBegin,
  kCommit,
  kRollback,
  kInsert,
  kGet,
  kStateOf,
  kMarkRunning,
  kSetState,
  kFinish,
  kUnfinished,
  kDeleteFinished,
  kCountByState,
  kCount
};

using sqlite_support::Call;
using sqlite_support::column_text;
using sqlite_support::dump_json;
using sqlite_support::exec;
using sqlite_support::query_text;
using sqlite_support::sqlite_status;

namespace {

// Migration i takes the schema from user_version i to i + 1. Append only: never edit an
// entry once released; add a column with a new "ALTER TABLE jobs ADD COLUMN ..." entry.
constexpr std::string_view kMigrations[] = {
    R"sql(
      CREATE TABLE jobs (
        id          TEXT PRIMARY KEY,
        kind        TEXT NOT NULL,
        state       TEXT NOT NULL,
        request     TEXT NOT NULL,
        result      TEXT,
        device      TEXT NOT NULL DEFAULT '',
        error       TEXT NOT NULL DEFAULT '',
        attempts    INTEGER NOT NULL DEFAULT 0,
        created_ms  INTEGER NOT NULL,
        started_ms  INTEGER NOT NULL DEFAULT 0,
        finished_ms INTEGER NOT NULL DEFAULT 0
      ) STRICT;
      CREATE INDEX jobs_by_state ON jobs(state, created_ms);
      CREATE INDEX jobs_by_finished ON jobs(finished_ms);
    )sql",
    // 1 -> 2: Triton workbench sessions and their kernel versions (sqlite_workbench_store.h).
    R"sql(
      CREATE TABLE workbench_sessions (
        id          TEXT PRIMARY KEY,
        kernel_name TEXT NOT NULL DEFAULT '',
        state       TEXT NOT NULL,
        workspace   TEXT NOT NULL,
        data        TEXT NOT NULL,
        created_ms  INTEGER NOT NULL,
        updated_ms  INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX workbench_sessions_by_update ON workbench_sessions(updated_ms);
      CREATE TABLE workbench_versions (
        session_id  TEXT NOT NULL REFERENCES workbench_sessions(id) ON DELETE CASCADE,
        version     INTEGER NOT NULL,
        file        TEXT NOT NULL,
        source      TEXT NOT NULL,
        results     TEXT NOT NULL,
        created_ms  INTEGER NOT NULL,
        PRIMARY KEY (session_id, version)
      ) STRICT;
    )sql",
    // 2 -> 3: who submitted each job (model/principal.h); jobs stored before have no
    // submitter, which only admins (and servers without tokens) see.
    R"sql(
      ALTER TABLE jobs ADD COLUMN submitter TEXT NOT NULL DEFAULT '';
    )sql",
    // 3 -> 4: whether only the submitting process can receive the job's result (model/job.h);
    // jobs stored before were all durable ones.
    R"sql(
      ALTER TABLE jobs ADD COLUMN process_bound INTEGER NOT NULL DEFAULT 0;
    )sql",
    // 4 -> 5: job listings (GET /jobs) read newest first by (created_ms, id).
    R"sql(
      CREATE INDEX IF NOT EXISTS jobs_by_created ON jobs(created_ms, id);
    )sql",
};

// The candidate's kernel_type in a stored request (a compare's custom_kernel, else kernel).
constexpr std::string_view kKernelTypeSql =
    "COALESCE(json_extract(request, '$.custom_kernel.kernel_type'),"
    " json_extract(request, '$.kernel.kernel_type'))";

// kSelectJob for a listing: the request and result cut to what it shows (Store::list_jobs).
std::string select_listed_job() {
  const JsonSqlDialect dialect{
      "json_object",
      [](std::string_view name) { return "result -> '$." + std::string(name) + "'"; }, ""};
  return "SELECT id, kind, state, " + listed_request_sql(kKernelTypeSql, dialect) + ", " +
         listed_result_sql(dialect) +
         ", device, error, attempts, created_ms, started_ms, finished_ms, submitter,"
         " process_bound FROM jobs";
}

constexpr std::string_view kSelectJob =
    "SELECT id, kind, state, request, result, device, error, attempts, created_ms, started_ms,"
    " finished_ms, submitter, process_bound FROM jobs";

// Applies the migrations the database lacks; runs inside the caller's transaction.
Status apply_migrations(sqlite3* db) {
  KF_ASSIGN_OR_RETURN(std::string text, query_text(db, "PRAGMA user_version"));
  int version = -1;
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), version);
  const int latest = static_cast<int>(std::size(kMigrations));
  if (err != std::errc() || end != text.data() + text.size() || version < 0 || version > latest) {
    return failed_precondition("database schema version " + text + " is not one this binary (" +
                               std::to_string(latest) + ") understands");
  }
  for (int v = version; v < latest; ++v) {
    const std::string to = std::to_string(v + 1);
    KF_RETURN_IF_ERROR(exec(db, std::string(kMigrations[v]), "migrate schema to version " + to));
    KF_RETURN_IF_ERROR(exec(db, "PRAGMA user_version = " + to, "set schema version " + to));
  }
  return Status::ok();
}

// Decodes a row of kSelectJob.
StatusOr<JobRecord> decode_job(sqlite3_stmt* stmt) {
  JobRecord job;
  job.id = column_text(stmt, 0);
  auto corrupt = [&job](const std::string& what) {
    return internal_error("job " + job.id + ": corrupted row: " + what);
  };
  const std::string kind = column_text(stmt, 1);
  const std::optional<model::JobKind> parsed_kind = model::job_kind_from(kind);
  if (!parsed_kind) return corrupt("unknown kind '" + kind + "'");
  job.kind = *parsed_kind;
  const std::string state = column_text(stmt, 2);
  const std::optional<JobState> parsed_state = model::job_state_from(state);
  if (!parsed_state) return corrupt("unknown state '" + state + "'");
  job.state = *parsed_state;
  StatusOr<Json> request = parse_json(column_text(stmt, 3));
  if (!request) return corrupt("request: " + request.status().message());
  job.request = std::move(request).value();
  if (sqlite3_column_type(stmt, 4) != SQLITE_NULL) {
    StatusOr<Json> result = parse_json(column_text(stmt, 4));
    if (!result) return corrupt("result: " + result.status().message());
    job.result = std::move(result).value();
  }
  job.device = column_text(stmt, 5);
  job.error = column_text(stmt, 6);
  job.attempts = sqlite3_column_int(stmt, 7);
  job.created_ms = sqlite3_column_int64(stmt, 8);
  job.started_ms = sqlite3_column_int64(stmt, 9);
  job.finished_ms = sqlite3_column_int64(stmt, 10);
  job.submitter = column_text(stmt, 11);
  job.process_bound = sqlite3_column_int(stmt, 12) != 0;
  return job;
}

StatusOr<std::vector<JobRecord>> read_jobs(Call& call, std::string_view what) {
  std::vector<JobRecord> out;
  while (true) {
    KF_ASSIGN_OR_RETURN(bool row, call.step(what));
    if (!row) return out;
    KF_ASSIGN_OR_RETURN(JobRecord job, decode_job(call.stmt()));
    out.push_back(std::move(job));
  }
}

Status check_transition(const std::string& id, JobState from, JobState to) {
  if (model::can_transition(from, to)) return Status::ok();
  return failed_precondition("job " + id + " is " + std::string(model::to_string(from)) +
                             " and cannot become " + std::string(model::to_string(to)));
}

}  // namespace

StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::open(const Options& options) {
  if (options.path.empty()) return invalid_argument("sqlite store: empty database path");
  const std::string where = options.path.string();
  if (options.path.has_parent_path()) KF_RETURN_IF_ERROR(make_dirs(options.path.parent_path()));
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(where.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status status = sqlite_status(db, rc, "open " + where);
    sqlite3_close(db);  // a handle is returned even on failure
    return status;
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db));
  MutexLock lock(store->mu_);
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, options.busy_timeout_ms);
  KF_ASSIGN_OR_RETURN(std::string mode, query_text(db, "PRAGMA journal_mode=WAL"));
  if (mode != "wal") {
    return failed_precondition(where + ": cannot enable WAL (journal_mode is " + mode + ")");
  }
  // FULL in WAL mode: every commit is fsynced to the WAL before it returns, so an
  // acknowledged job survives power loss. NORMAL skips that fsync (a killed process loses
  // nothing, an OS crash may lose the last commits); checkpoints are fsynced either way.
  const char* sync = options.synchronous == Synchronous::kFull ? "FULL" : "NORMAL";
  KF_RETURN_IF_ERROR(exec(db, std::string("PRAGMA synchronous=") + sync, where));
  KF_RETURN_IF_ERROR(exec(db, "PRAGMA foreign_keys=ON", where));
  KF_RETURN_IF_ERROR(store->migrate().with_context(where));
  KF_RETURN_IF_ERROR(store->prepare_statements().with_context(where));
  return store;
}

StatusOr<SqliteStore::Synchronous> SqliteStore::synchronous() {
  MutexLock lock(mu_);
  // Read in place (not moved out of the StatusOr: GCC 12 then warns of an uninitialised read).
  const StatusOr<std::string> level = query_text(db_, "PRAGMA synchronous");
  if (!level.is_ok()) return level.status();
  if (*level == "2") return Synchronous::kFull;
  if (*level == "1") return Synchronous::kNormal;
  return internal_error("PRAGMA synchronous is " + *level + ", neither FULL (2) nor NORMAL (1)");
}

int SqliteStore::schema_version() {
  return static_cast<int>(std::size(kMigrations));
}

SqliteStore::SqliteStore(sqlite3* db) : db_(db) {}

SqliteStore::~SqliteStore() {
  MutexLock lock(mu_);
  for (sqlite3_stmt* stmt : statements_)
    sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

Status SqliteStore::migrate() {
  KF_RETURN_IF_ERROR(exec(db_, "BEGIN IMMEDIATE", "begin migration"));
  Status status = apply_migrations(db_);
  if (status.is_ok()) status = exec(db_, "COMMIT", "commit migration");
  if (!status.is_ok()) exec(db_, "ROLLBACK", "roll back migration").ignore();
  return status;
}

Status SqliteStore::prepare_statements() {
  const std::string select(kSelectJob);
  const std::pair<Query, std::string> queries[] = {
      {Query::kBegin, "BEGIN IMMEDIATE"},
      {Query::kCommit, "COMMIT"},
      {Query::kRollback, "ROLLBACK"},
      {Query::kInsert,
       "INSERT INTO jobs (id, kind, state, request, result, device, error, attempts, created_ms,"
       " started_ms, finished_ms, submitter, process_bound)"
       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
      {Query::kGet, select + " WHERE id = ?"},
      {Query::kStateOf, "SELECT state FROM jobs WHERE id = ?"},
      {Query::kMarkRunning,
       "UPDATE jobs SET state = ?, device = ?, started_ms = ?, attempts = attempts + 1"
       " WHERE id = ?"},
      {Query::kSetState, "UPDATE jobs SET state = ? WHERE id = ?"},
      {Query::kFinish,
       "UPDATE jobs SET state = ?, result = ?, error = ?, finished_ms = ? WHERE id = ?"},
      {Query::kUnfinished, select + " WHERE state IN (?, ?) ORDER BY created_ms, rowid"},
      {Query::kDeleteFinished, "DELETE FROM jobs WHERE state IN (?, ?, ?) AND finished_ms < ?"},
      {Query::kCountByState,
       "SELECT state, COUNT(*), COALESCE(SUM(created_ms), 0) FROM jobs GROUP BY state"},
  };
  static_assert(std::size(queries) == static_cast<size_t>(Query::kCount));
  statements_.assign(static_cast<size_t>(Query::kCount), nullptr);
  for (const auto& [query, sql] : queries) {
    sqlite3_stmt*& slot = statements_[static_cast<size_t>(query)];
    const int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                                      SQLITE_PREPARE_PERSISTENT, &slot, nullptr);
    if (rc != SQLITE_OK) return sqlite_status(db_, rc, "prepare " + sql);
  }
  return Status::ok();
}

sqlite3_stmt* SqliteStore::statement(Query q) {
  return statements_[static_cast<size_t>(q)];
}

Status SqliteStore::in_transaction(const std::function<Status()>& body) {
  KF_RETURN_IF_ERROR(Call(db_, statement(Query::kBegin)).run("begin transaction"));
  Status status = body();
  if (status.is_ok()) status = Call(db_, statement(Query::kCommit)).run("commit");
  if (!status.is_ok()) Call(db_, statement(Query::kRollback)).run("roll back").ignore();
  return status;
}

StatusOr<JobState> SqliteStore::state_of(const std::string& id) {
  Call call(db_, statement(Query::kStateOf));
  call.text(id);
  KF_ASSIGN_OR_RETURN(bool row, call.step("read state of job " + id));
  if (!row) return not_found("unknown job " + id);
  const std::string text = column_text(call.stmt(), 0);
  const std::optional<JobState> state = model::job_state_from(text);
  if (!state) return internal_error("job " + id + ": corrupted row: unknown state '" + text + "'");
  return *state;
}

Status SqliteStore::insert_job(const JobRecord& job) {
  if (job.id.empty()) return invalid_argument("job id is empty", "id");
  MutexLock lock(mu_);
  return Call(db_, statement(Query::kInsert))
      .text(job.id)
      .text(model::to_string(job.kind))
      .text(model::to_string(job.state))
      .text(dump_json(job.request))
      .json(job.result)
      .text(job.device)
      .text(job.error)
      .integer(job.attempts)
      .integer(job.created_ms)
      .integer(job.started_ms)
      .integer(job.finished_ms)
      .text(job.submitter)
      .integer(job.process_bound ? 1 : 0)
      .run("insert job " + job.id);
}

Status SqliteStore::mark_running(const std::string& id, const std::string& device,
                                 int64_t started_ms) {
  MutexLock lock(mu_);
  return in_transaction([&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    KF_ASSIGN_OR_RETURN(JobState state, state_of(id));
    KF_RETURN_IF_ERROR(check_transition(id, state, JobState::kRunning));
    return Call(db_, statement(Query::kMarkRunning))
        .text(model::to_string(JobState::kRunning))
        .text(device)
        .integer(started_ms)
        .text(id)
        .run("mark job " + id + " running");
  });
}

Status SqliteStore::requeue(const std::string& id) {
  MutexLock lock(mu_);
  return in_transaction([&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    KF_ASSIGN_OR_RETURN(JobState state, state_of(id));
    if (state == JobState::kQueued) return Status::ok();
    KF_RETURN_IF_ERROR(check_transition(id, state, JobState::kQueued));
    return Call(db_, statement(Query::kSetState))
        .text(model::to_string(JobState::kQueued))
        .text(id)
        .run("requeue job " + id);
  });
}

Status SqliteStore::finish_job(const std::string& id, JobState state, const Json& result,
                               const std::string& error, int64_t finished_ms) {
  if (!model::is_terminal(state)) {
    return invalid_argument("finish_job needs a terminal state, not " +
                            std::string(model::to_string(state)));
  }
  MutexLock lock(mu_);
  return in_transaction([&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    KF_ASSIGN_OR_RETURN(JobState current, state_of(id));
    if (model::is_terminal(current)) {
      return failed_precondition("job " + id + " is already " +
                                 std::string(model::to_string(current)));
    }
    KF_RETURN_IF_ERROR(check_transition(id, current, state));
    return Call(db_, statement(Query::kFinish))
        .text(model::to_string(state))
        .json(result)
        .text(error)
        .integer(finished_ms)
        .text(id)
        .run("finish job " + id);
  });
}

StatusOr<std::optional<JobRecord>> SqliteStore::get_job(const std::string& id) {
  MutexLock lock(mu_);
  Call call(db_, statement(Query::kGet));
  call.text(id);
  KF_ASSIGN_OR_RETURN(bool row, call.step("get job " + id));
  if (!row) return std::optional<JobRecord>();
  KF_ASSIGN_OR_RETURN(JobRecord job, decode_job(call.stmt()));
  return std::optional<JobRecord>(std::move(job));
}

StatusOr<std::vector<JobRecord>> SqliteStore::unfinished_jobs() {
  MutexLock lock(mu_);
  Call call(db_, statement(Query::kUnfinished));
  call.text(model::to_string(JobState::kQueued)).text(model::to_string(JobState::kRunning));
  return read_jobs(call, "list unfinished jobs");
}

StatusOr<std::vector<JobRecord>> SqliteStore::list_jobs(const model::JobQuery& query) {
  KF_ASSIGN_OR_RETURN(JobListSql sql, job_list_sql(query, kKernelTypeSql, [](int) { return "?"; }));
  const std::string text = select_listed_job() + sql.tail;
  MutexLock lock(mu_);
  sqlite3_stmt* stmt = nullptr;
  const int rc =
      sqlite3_prepare_v2(db_, text.c_str(), static_cast<int>(text.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return sqlite_status(db_, rc, "prepare the job listing");
  std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> owned(stmt, &sqlite3_finalize);
  Call call(db_, stmt);
  for (const SqlParam& p : sql.params) {
    if (p.is_integer) {
      call.integer(p.integer);
    } else {
      call.text(p.text);
    }
  }
  return read_jobs(call, "list jobs");
}

StatusOr<int64_t> SqliteStore::delete_finished_before(int64_t unix_ms) {
  MutexLock lock(mu_);
  Call call(db_, statement(Query::kDeleteFinished));
  call.text(model::to_string(JobState::kSucceeded))
      .text(model::to_string(JobState::kFailed))
      .text(model::to_string(JobState::kCancelled))
      .integer(unix_ms);
  KF_RETURN_IF_ERROR(call.run("delete finished jobs"));
  return static_cast<int64_t>(sqlite3_changes64(db_));
}

StatusOr<std::map<JobState, int64_t>> SqliteStore::count_by_state() {
  return counts_of(job_summary());
}

StatusOr<std::map<JobState, Store::StateSummary>> SqliteStore::job_summary() {
  std::map<JobState, StateSummary> summary = empty_summary();
  MutexLock lock(mu_);
  Call call(db_, statement(Query::kCountByState));
  while (true) {
    KF_ASSIGN_OR_RETURN(bool row, call.step("count jobs by state"));
    if (!row) return summary;
    const std::string text = column_text(call.stmt(), 0);
    const std::optional<JobState> state = model::job_state_from(text);
    if (!state) return internal_error("jobs table holds an unknown state '" + text + "'");
    summary[*state] =
        StateSummary{sqlite3_column_int64(call.stmt(), 1), sqlite3_column_int64(call.stmt(), 2)};
  }
}

}  // namespace kforge::store
