#include "kforge/store/postgres/postgres_store.h"

#include <string_view>
#include <utility>

#include "kforge/common/json.h"
#include "kforge/store/job_query_sql.h"
#include "kforge/store/postgres/job_rows.h"
#include "kforge/store/postgres/pg_connection.h"
#include "kforge/store/summary.h"

namespace kforge::store {

using job_rows::check_transition;
using job_rows::decode_job;
using job_rows::decode_jobs;
using job_rows::dump;
using job_rows::kChannel;
using job_rows::kColumns;
using job_rows::kKernelTypeSql;
using job_rows::listed_columns;
using job_rows::lock_job;
using job_rows::Locked;
using job_rows::not_owner;
using job_rows::notify;
using job_rows::state_name;
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

}  // namespace kforge::store
