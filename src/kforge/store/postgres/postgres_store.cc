#include "kforge/store/postgres/postgres_store.h"

#include <poll.h>

#include <cerrno>
#include <string_view>
#include <utility>
#include <variant>

#include "kforge/common/json.h"
#include "kforge/store/job_query_sql.h"
#include "kforge/store/postgres/pg_connection.h"
#include "kforge/store/summary.h"

namespace kforge::store {

using model::JobRecord;
using model::JobState;
using pg::Param;
using pg::Rows;

namespace {

// Migration i takes the schema from version i to i + 1. Append only: never edit an entry
// once released.
constexpr std::string_view kMigrations[] = {
    R"sql(
      CREATE TABLE jobs (
        seq           bigserial NOT NULL,
        id            text PRIMARY KEY,
        kind          text NOT NULL,
        state         text NOT NULL,
        request       text NOT NULL,
        result        text,
        device        text NOT NULL DEFAULT '',
        error         text NOT NULL DEFAULT '',
        attempts      integer NOT NULL DEFAULT 0,
        created_ms    bigint NOT NULL,
        started_ms    bigint NOT NULL DEFAULT 0,
        finished_ms   bigint NOT NULL DEFAULT 0,
        owner         text,
        lease_until   timestamptz,
        cancel_reason text
      );
      CREATE INDEX jobs_queued ON jobs (created_ms, seq) WHERE state = 'queued';
      CREATE INDEX jobs_running ON jobs (owner) WHERE state = 'running';
      CREATE INDEX jobs_by_finished ON jobs (finished_ms);
      CREATE TABLE job_runs (
        job_id     text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        attempt    integer NOT NULL,
        node       text NOT NULL,
        device     text NOT NULL,
        claimed_ms bigint NOT NULL,
        ended_ms   bigint,
        outcome    text,
        PRIMARY KEY (job_id, attempt)
      );
    )sql",
    // 1 -> 2: who submitted each job (model/principal.h; not `owner`, the node that runs it).
    // Jobs stored before have no submitter, which only admins (and servers without tokens) see.
    R"sql(
      ALTER TABLE jobs ADD COLUMN submitter text NOT NULL DEFAULT '';
    )sql",
    // 2 -> 3: job listings (GET /jobs) read newest first by (created_ms, id).
    R"sql(
      CREATE INDEX IF NOT EXISTS jobs_by_created ON jobs (created_ms, id);
    )sql",
};

// The candidate's kernel_type in a stored request (a compare's custom_kernel, else kernel).
constexpr std::string_view kKernelTypeSql =
    "COALESCE(request::jsonb #>> '{custom_kernel,kernel_type}',"
    " request::jsonb #>> '{kernel,kernel_type}')";

constexpr std::string_view kChannel = "kforge_jobs";
constexpr std::string_view kColumns =
    "id, kind, state, request, result, device, error, attempts, created_ms, started_ms, "
    "finished_ms, submitter";
// kColumns without the request (a claim does not need it: run_job reads it back).
constexpr std::string_view kColumnsNoRequest =
    "id, kind, state, NULL, result, device, error, attempts, created_ms, started_ms, "
    "finished_ms, submitter";

// kColumns for a listing: the request and result cut to what it shows (Store::list_jobs).
std::string listed_columns() {
  const JsonSqlDialect dialect{
      "jsonb_build_object",
      [](std::string_view name) { return "result::jsonb -> '" + std::string(name) + "'"; },
      "::text"};
  return "id, kind, state, " + listed_request_sql(kKernelTypeSql, dialect) + ", " +
         listed_result_sql(dialect) +
         ", device, error, attempts, created_ms, started_ms, finished_ms, submitter";
}

std::string dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string state_name(JobState s) {
  return std::string(model::to_string(s));
}

// Decodes row `row` of a query selecting kColumns (or kColumnsNoRequest).
StatusOr<JobRecord> decode_job(const Rows& rows, int row) {
  JobRecord job;
  job.id = rows.text(row, 0);
  auto corrupt = [&job](const std::string& what) {
    return internal_error("job " + job.id + ": corrupted row: " + what);
  };
  const std::string kind = rows.text(row, 1);
  const std::optional<model::JobKind> parsed_kind = model::job_kind_from(kind);
  if (!parsed_kind) return corrupt("unknown kind '" + kind + "'");
  job.kind = *parsed_kind;
  const std::string state = rows.text(row, 2);
  const std::optional<JobState> parsed_state = model::job_state_from(state);
  if (!parsed_state) return corrupt("unknown state '" + state + "'");
  job.state = *parsed_state;
  if (!rows.null(row, 3)) {
    StatusOr<Json> request = parse_json(rows.text(row, 3));
    if (!request) return corrupt("request: " + request.status().message());
    job.request = std::move(request).value();
  }
  if (!rows.null(row, 4)) {
    StatusOr<Json> result = parse_json(rows.text(row, 4));
    if (!result) return corrupt("result: " + result.status().message());
    job.result = std::move(result).value();
  }
  job.device = rows.text(row, 5);
  job.error = rows.text(row, 6);
  job.attempts = static_cast<int>(rows.integer(row, 7));
  job.created_ms = rows.integer(row, 8);
  job.started_ms = rows.integer(row, 9);
  job.finished_ms = rows.integer(row, 10);
  job.submitter = rows.text(row, 11);
  return job;
}

StatusOr<std::vector<JobRecord>> decode_jobs(const Rows& rows) {
  std::vector<JobRecord> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) {
    KF_ASSIGN_OR_RETURN(JobRecord job, decode_job(rows, i));
    out.push_back(std::move(job));
  }
  return out;
}

Status check_transition(const std::string& id, JobState from, JobState to) {
  if (model::can_transition(from, to)) return Status::ok();
  return failed_precondition("job " + id + " is " + state_name(from) + " and cannot become " +
                             state_name(to));
}

// A PostgreSQL array literal of plain strings: {"cpu","gpu"}.
std::string text_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

struct Locked {
  JobState state;
  std::string owner;
  int attempts;
};

// The state, owner and attempts of job `id`, its row locked until the transaction ends.
StatusOr<Locked> lock_job(pg::Connection& conn, const std::string& id) {
  KF_ASSIGN_OR_RETURN(Rows rows, conn.query("SELECT state, COALESCE(owner, ''), attempts FROM jobs"
                                            " WHERE id = $1 FOR UPDATE",
                                            {id}, "read job " + id));
  if (rows.size() == 0) return not_found("unknown job " + id);
  const std::string text = rows.text(0, 0);
  const std::optional<JobState> state = model::job_state_from(text);
  if (!state) return internal_error("job " + id + ": corrupted row: unknown state '" + text + "'");
  return Locked{*state, rows.text(0, 1), static_cast<int>(rows.integer(0, 2))};
}

// Fencing: a running job only its lease holder may change (finish, requeue).
Status not_owner(const std::string& id, const std::string& node, const std::string& owner) {
  return failed_precondition("job " + id + " is no longer this node's (" + node +
                             "): " + (owner.empty() ? "unowned" : "owned by " + owner));
}

Status notify(pg::Connection& conn, std::string_view event, const std::string& id) {
  return conn
      .query("SELECT pg_notify($1, $2)", {std::string(kChannel), std::string(event) + ":" + id},
             "notify " + std::string(event) + " " + id)
      .status();
}

}  // namespace

StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::open(const Options& options) {
  KF_RETURN_IF_ERROR(pg::check_conninfo(options.conninfo, "--store"));
  if (options.node_id.empty()) return invalid_argument("empty node id", "--node-id");
  if (options.lease < std::chrono::seconds(1)) {
    return invalid_argument("a lease must last at least 1 s", "--lease-seconds");
  }
  KF_ASSIGN_OR_RETURN(auto conn, pg::Connection::open(options.conninfo));
  std::unique_ptr<PostgresStore> store(new PostgresStore(options, std::move(conn)));
  {
    MutexLock lock(store->mu_);
    KF_RETURN_IF_ERROR(store->migrate());
  }
  {
    MutexLock lock(store->listen_mu_);
    KF_RETURN_IF_ERROR(store->listen());
  }
  return store;
}

int PostgresStore::schema_version() {
  return static_cast<int>(std::size(kMigrations));
}

PostgresStore::PostgresStore(Options options, std::unique_ptr<pg::Connection> conn)
    : options_(std::move(options)), conn_(std::move(conn)) {}

PostgresStore::~PostgresStore() = default;

std::string PostgresStore::lease_seconds() const {
  return std::to_string(static_cast<double>(options_.lease.count()) / 1000.0);
}

Status PostgresStore::migrate() {
  return conn_->transaction("migrate the schema", [&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    // Nodes that start together wait here for the first one's migration.
    KF_RETURN_IF_ERROR(conn_->exec("SELECT pg_advisory_xact_lock(7283110452)", "lock schema"));
    KF_RETURN_IF_ERROR(
        conn_->exec("CREATE TABLE IF NOT EXISTS kforge_schema_version (version integer NOT NULL)",
                    "create kforge_schema_version"));
    KF_ASSIGN_OR_RETURN(Rows rows, conn_->query("SELECT version FROM kforge_schema_version", {},
                                                "read the schema version"));
    const int latest = schema_version();
    int version = 0;
    if (rows.size() == 0) {
      KF_RETURN_IF_ERROR(conn_->exec("INSERT INTO kforge_schema_version VALUES (0)",
                                     "initialise the schema version"));
    } else {
      version = static_cast<int>(rows.integer(0, 0));
    }
    if (rows.size() > 1 || version < 0 || version > latest) {
      return failed_precondition("database schema version " + std::to_string(version) +
                                 " is not one this binary (" + std::to_string(latest) +
                                 ") understands");
    }
    for (int v = version; v < latest; ++v) {
      const std::string to = std::to_string(v + 1);
      KF_RETURN_IF_ERROR(conn_->exec(kMigrations[v], "migrate schema to version " + to));
      KF_RETURN_IF_ERROR(conn_->exec("UPDATE kforge_schema_version SET version = " + to,
                                     "set schema version " + to));
    }
    return Status::ok();
  });
}

Status PostgresStore::insert_job(const JobRecord& job) {
  if (job.id.empty()) return invalid_argument("job id is empty", "id");
  MutexLock lock(mu_);
  // One statement, so one transaction: the row and its "queued" event commit together.
  // job.process_bound has no column: no job of a shared queue is process-bound
  // (jobs/job_service_impl.h).
  const std::string sql = "WITH ins AS (INSERT INTO jobs (" + std::string(kColumns) +
                          ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
                          " RETURNING id, state)"
                          " SELECT pg_notify('" +
                          std::string(kChannel) +
                          "', 'queued:' || id) FROM ins WHERE state = 'queued'";
  return conn_
      ->query(sql,
              {job.id, std::string(model::to_string(job.kind)), state_name(job.state),
               dump(job.request), job.result.is_null() ? Param() : Param(dump(job.result)),
               job.device, job.error, std::to_string(job.attempts), std::to_string(job.created_ms),
               std::to_string(job.started_ms), std::to_string(job.finished_ms), job.submitter},
              "insert job " + job.id)
      .status();
}

Status PostgresStore::mark_running(const std::string& id, const std::string& device,
                                   int64_t started_ms) {
  MutexLock lock(mu_);
  return conn_->transaction("mark job " + id + " running", [&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    KF_ASSIGN_OR_RETURN(Locked job, lock_job(*conn_, id));
    KF_RETURN_IF_ERROR(check_transition(id, job.state, JobState::kRunning));
    KF_RETURN_IF_ERROR(
        conn_
            ->query("UPDATE jobs SET state = 'running', device = $2, started_ms = "
                    "$3, attempts = attempts + 1, owner = $4, lease_until = "
                    "clock_timestamp() + make_interval(secs => $5) WHERE id = $1",
                    {id, device, std::to_string(started_ms), options_.node_id, lease_seconds()},
                    "mark job " + id + " running")
            .status());
    return conn_
        ->query(
            "INSERT INTO job_runs (job_id, attempt, node, device, claimed_ms) VALUES ($1, $2,"
            " $3, $4, $5)",
            {id, std::to_string(job.attempts + 1), options_.node_id, device,
             std::to_string(started_ms)},
            "record a run of job " + id)
        .status();
  });
}

Status PostgresStore::requeue(const std::string& id) {
  MutexLock lock(mu_);
  return conn_->transaction("requeue job " + id, [&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    KF_ASSIGN_OR_RETURN(Locked job, lock_job(*conn_, id));
    if (job.state == JobState::kQueued) return Status::ok();
    if (job.state == JobState::kRunning && job.owner != options_.node_id) {
      return not_owner(id, options_.node_id, job.owner);
    }
    KF_RETURN_IF_ERROR(check_transition(id, job.state, JobState::kQueued));
    KF_RETURN_IF_ERROR(conn_
                           ->query("UPDATE jobs SET state = 'queued', owner = NULL, lease_until "
                                   "= NULL WHERE id = $1",
                                   {id}, "requeue job " + id)
                           .status());
    KF_RETURN_IF_ERROR(conn_
                           ->query("UPDATE job_runs SET outcome = 'requeued' WHERE job_id = $1 "
                                   "AND attempt = $2 AND outcome IS NULL",
                                   {id, std::to_string(job.attempts)}, "end a run of job " + id)
                           .status());
    return notify(*conn_, "queued", id);
  });
}

Status PostgresStore::finish_job(const std::string& id, JobState state, const Json& result,
                                 const std::string& error, int64_t finished_ms) {
  if (!model::is_terminal(state)) {
    return invalid_argument("finish_job needs a terminal state, not " + state_name(state));
  }
  MutexLock lock(mu_);
  return conn_->transaction("finish job " + id, [&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    KF_ASSIGN_OR_RETURN(Locked job, lock_job(*conn_, id));
    if (model::is_terminal(job.state)) {
      return failed_precondition("job " + id + " is already " + state_name(job.state));
    }
    if (job.state == JobState::kRunning && job.owner != options_.node_id) {
      // Fencing: this node's lease ran out and the job went to another node (or back to the
      // queue); only the lease holder records the result.
      return not_owner(id, options_.node_id, job.owner);
    }
    KF_RETURN_IF_ERROR(check_transition(id, job.state, state));
    KF_RETURN_IF_ERROR(
        conn_
            ->query("UPDATE jobs SET state = $2, result = $3, error = $4, finished_ms = $5, "
                    "owner = NULL, lease_until = NULL, cancel_reason = NULL WHERE id = $1",
                    {id, state_name(state), result.is_null() ? Param() : Param(dump(result)), error,
                     std::to_string(finished_ms)},
                    "finish job " + id)
            .status());
    if (job.state == JobState::kRunning) {
      KF_RETURN_IF_ERROR(conn_
                             ->query("UPDATE job_runs SET outcome = $3, ended_ms = $4 WHERE "
                                     "job_id = $1 AND attempt = $2 AND node = $5",
                                     {id, std::to_string(job.attempts), state_name(state),
                                      std::to_string(finished_ms), options_.node_id},
                                     "end a run of job " + id)
                             .status());
    }
    return notify(*conn_, "done", id);
  });
}

StatusOr<std::optional<JobRecord>> PostgresStore::get_job(const std::string& id) {
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(
      Rows rows, conn_->query("SELECT " + std::string(kColumns) + " FROM jobs WHERE id = $1", {id},
                              "get job " + id));
  if (rows.size() == 0) return std::optional<JobRecord>();
  KF_ASSIGN_OR_RETURN(JobRecord job, decode_job(rows, 0));
  return std::optional<JobRecord>(std::move(job));
}

StatusOr<std::vector<JobRecord>> PostgresStore::unfinished_jobs() {
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(Rows rows, conn_->query("SELECT " + std::string(kColumns) +
                                                  " FROM jobs WHERE state IN ('queued', "
                                                  "'running') ORDER BY created_ms, seq",
                                              {}, "list unfinished jobs"));
  return decode_jobs(rows);
}

StatusOr<std::vector<JobRecord>> PostgresStore::list_jobs(const model::JobQuery& query) {
  KF_ASSIGN_OR_RETURN(JobListSql sql, job_list_sql(query, kKernelTypeSql,
                                                   [](int i) { return "$" + std::to_string(i); }));
  std::vector<Param> params;
  params.reserve(sql.params.size());
  for (const SqlParam& p : sql.params)
    params.emplace_back(p.text);
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(
      Rows rows,
      conn_->query("SELECT " + listed_columns() + " FROM jobs" + sql.tail, params, "list jobs"));
  return decode_jobs(rows);
}

StatusOr<int64_t> PostgresStore::delete_finished_before(int64_t unix_ms) {
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(Rows rows, conn_->query("DELETE FROM jobs WHERE state IN ('success', "
                                              "'failed', 'cancelled') AND finished_ms < $1",
                                              {std::to_string(unix_ms)}, "delete finished jobs"));
  return rows.affected();
}

StatusOr<std::map<JobState, int64_t>> PostgresStore::count_by_state() {
  return counts_of(job_summary());
}

StatusOr<std::map<JobState, Store::StateSummary>> PostgresStore::job_summary() {
  std::map<JobState, StateSummary> summary = empty_summary();
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(Rows rows, conn_->query("SELECT state, COUNT(*), COALESCE(SUM(created_ms), "
                                              "0) FROM jobs GROUP BY state",
                                              {}, "count jobs by state"));
  for (int i = 0; i < rows.size(); ++i) {
    const std::string text = rows.text(i, 0);
    const std::optional<JobState> state = model::job_state_from(text);
    if (!state) return internal_error("jobs table holds an unknown state '" + text + "'");
    summary[*state] = StateSummary{rows.integer(i, 1), rows.integer(i, 2)};
  }
  return summary;
}

StatusOr<std::optional<JobRecord>> PostgresStore::claim(const std::vector<std::string>& targets,
                                                        const std::string& device,
                                                        int64_t started_ms) {
  MutexLock lock(mu_);
  std::optional<JobRecord> claimed;
  const Status status = conn_->transaction("claim a job for " + device, [&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    // SKIP LOCKED: nodes claiming at once take different jobs instead of waiting on one.
    KF_ASSIGN_OR_RETURN(
        Rows rows,
        conn_->query(
            "WITH next AS (SELECT id AS next_id FROM jobs WHERE state = 'queued' AND device = "
            "ANY($1::text[]) ORDER BY created_ms, seq LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " UPDATE jobs SET state = 'running', device = $2, started_ms = $3, "
            "attempts = attempts + 1, owner = $4, lease_until = clock_timestamp() + "
            "make_interval(secs => $5), cancel_reason = NULL FROM next WHERE jobs.id = "
            "next.next_id RETURNING " +
                std::string(kColumnsNoRequest),
            {text_array(targets), device, std::to_string(started_ms), options_.node_id,
             lease_seconds()},
            "claim a job for " + device));
    if (rows.size() == 0) return Status::ok();
    KF_ASSIGN_OR_RETURN(JobRecord job, decode_job(rows, 0));
    KF_RETURN_IF_ERROR(conn_
                           ->query("INSERT INTO job_runs (job_id, attempt, node, device, "
                                   "claimed_ms) VALUES ($1, $2, $3, $4, $5)",
                                   {job.id, std::to_string(job.attempts), options_.node_id, device,
                                    std::to_string(started_ms)},
                                   "record a run of job " + job.id)
                           .status());
    claimed = std::move(job);
    return Status::ok();
  });
  if (!status) return status;
  return claimed;
}

StatusOr<std::vector<SharedQueue::CancelRequest>> PostgresStore::heartbeat(
    const std::vector<std::string>& running) {
  if (running.empty()) return std::vector<CancelRequest>();
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(
      Rows rows,
      conn_->query("UPDATE jobs SET lease_until = clock_timestamp() + "
                   "make_interval(secs => $2) WHERE owner = $1 AND state = "
                   "'running' AND id = ANY($3::text[]) RETURNING id, cancel_reason",
                   {options_.node_id, lease_seconds(), text_array(running)}, "renew leases"));
  std::vector<CancelRequest> out;
  for (int i = 0; i < rows.size(); ++i) {
    if (!rows.null(i, 1)) out.push_back({rows.text(i, 0), rows.text(i, 1)});
  }
  return out;
}

StatusOr<int64_t> PostgresStore::recover_expired(int max_attempts, int64_t now_ms) {
  return recover("lease_until < clock_timestamp()", {}, max_attempts, now_ms,
                 "stopped renewing its lease");
}

StatusOr<int64_t> PostgresStore::recover_own(int max_attempts, int64_t now_ms) {
  return recover("owner = $1", {options_.node_id}, max_attempts, now_ms,
                 "was restarted while running it");
}

StatusOr<std::vector<std::string>> PostgresStore::finished_among(
    const std::vector<std::string>& ids) {
  if (ids.empty()) return std::vector<std::string>();
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(
      Rows rows, conn_->query("SELECT x FROM unnest($1::text[]) AS x WHERE NOT EXISTS (SELECT 1 "
                              "FROM jobs WHERE id = x AND state IN ('queued', 'running'))",
                              {text_array(ids)}, "find finished jobs"));
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i)
    out.push_back(rows.text(i, 0));
  return out;
}

StatusOr<int64_t> PostgresStore::recover(const std::string& where,
                                         const std::vector<std::string>& params, int max_attempts,
                                         int64_t now_ms, const std::string& why) {
  MutexLock lock(mu_);
  int64_t recovered = 0;
  const Status status = conn_->transaction("recover jobs of dead nodes", [&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    KF_ASSIGN_OR_RETURN(
        Rows rows,
        conn_->query("SELECT id, attempts, COALESCE(owner, ''), cancel_reason FROM jobs WHERE "
                     "state = 'running' AND " +
                         where + " FOR UPDATE SKIP LOCKED",
                     std::vector<Param>(params.begin(), params.end()), "find jobs to recover"));
    for (int i = 0; i < rows.size(); ++i) {
      const std::string id = rows.text(i, 0);
      const int64_t attempts = rows.integer(i, 1);
      const std::string owner = rows.text(i, 2);
      KF_RETURN_IF_ERROR(conn_
                             ->query("UPDATE job_runs SET outcome = 'lease_expired', ended_ms = "
                                     "$3 WHERE job_id = $1 AND attempt = $2 AND outcome IS NULL",
                                     {id, std::to_string(attempts), std::to_string(now_ms)},
                                     "end a run of job " + id)
                             .status());
      std::string state = "queued";
      std::string error;
      if (!rows.null(i, 3)) {
        state = "cancelled";
        error = rows.text(i, 3);
      } else if (attempts >= max_attempts) {
        state = "failed";
        error = "interrupted " + std::to_string(attempts) + " times (node ";
        error += owner;
        error += " ";
        error += why;
        error += "); not retried";
      }
      KF_RETURN_IF_ERROR(
          conn_
              ->query("UPDATE jobs SET state = $2, error = $3, finished_ms = CASE WHEN $2 = "
                      "'queued' THEN 0 ELSE $4::bigint END, owner = NULL, lease_until = NULL, "
                      "cancel_reason = NULL WHERE id = $1",
                      {id, state, error, std::to_string(now_ms)}, "recover job " + id)
              .status());
      KF_RETURN_IF_ERROR(notify(*conn_, state == "queued" ? "queued" : "done", id));
      ++recovered;
    }
    return Status::ok();
  });
  if (!status) return status;
  return recovered;
}

StatusOr<bool> PostgresStore::request_cancel(const std::string& id, const std::string& reason,
                                             int64_t now_ms) {
  MutexLock lock(mu_);
  bool terminal = false;
  const Status status = conn_->transaction("cancel job " + id, [&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    KF_ASSIGN_OR_RETURN(Locked job, lock_job(*conn_, id));
    if (model::is_terminal(job.state)) {
      terminal = true;
      return Status::ok();
    }
    if (job.state == JobState::kQueued) {
      terminal = true;
      KF_RETURN_IF_ERROR(conn_
                             ->query("UPDATE jobs SET state = 'cancelled', error = $2, "
                                     "finished_ms = $3 WHERE id = $1",
                                     {id, reason, std::to_string(now_ms)}, "cancel job " + id)
                             .status());
      return notify(*conn_, "done", id);
    }
    KF_RETURN_IF_ERROR(conn_
                           ->query("UPDATE jobs SET cancel_reason = $2 WHERE id = $1", {id, reason},
                                   "ask to cancel job " + id)
                           .status());
    return notify(*conn_, "cancel", id);
  });
  if (!status) return status;
  return terminal;
}

Status PostgresStore::listen() {
  if (listener_ && listener_->ok()) return Status::ok();
  listener_.reset();
  KF_ASSIGN_OR_RETURN(auto conn, pg::Connection::open(options_.conninfo));
  KF_RETURN_IF_ERROR(conn->exec("LISTEN " + std::string(kChannel), "listen for job events"));
  listener_ = std::move(conn);
  return Status::ok();
}

StatusOr<SharedQueue::Events> PostgresStore::wait_events(std::chrono::milliseconds timeout) {
  MutexLock lock(listen_mu_);
  Events events;
  if (!listener_ || !listener_->ok()) {
    KF_RETURN_IF_ERROR(listen());
    events.queued = true;  // events may have been missed while it was down: look again
  }
  pollfd fd{listener_->socket(), POLLIN, 0};
  const int ready = ::poll(&fd, 1, static_cast<int>(timeout.count()));
  if (ready < 0 && errno != EINTR) return errno_error("poll the PostgreSQL listener", errno);
  if (ready > 0) {
    if (Status s = listener_->consume_input(); !s) {
      listener_.reset();
      return s;
    }
  }
  for (auto& n : listener_->take_notifications()) {
    const std::string_view p = n.payload;
    const size_t colon = p.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view event = p.substr(0, colon);
    std::string id(p.substr(colon + 1));
    if (event == "queued") {
      events.queued = true;
    } else if (event == "done") {
      events.finished.push_back(std::move(id));
    } else if (event == "cancel") {
      events.cancel.push_back(std::move(id));
    }
  }
  return events;
}

}  // namespace kforge::store
