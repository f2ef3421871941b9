// The jobs table's rows as PostgresStore reads, locks and announces them: the columns a
// query selects, a row decoded into a JobRecord, a job's row locked for a transaction, the
// events sent on the `kforge_jobs` channel. Internal to store/postgres (postgres_store.cc
// and postgres_shared_queue.cc share it); nothing outside includes it.
//
// Example:
//   KF_ASSIGN_OR_RETURN(Rows rows, conn.query("SELECT " + std::string(job_rows::kColumns) +
//                                             " FROM jobs WHERE id = $1", {id}, "read job"));
//   KF_ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, job_rows::decode_jobs(rows));
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/job.h"
#include "kforge/store/postgres/pg_connection.h"

namespace kforge::store::job_rows {

// The candidate's kernel_type in a stored request (a compare's custom_kernel, else kernel).
inline constexpr std::string_view kKernelTypeSql =
    "COALESCE(request::jsonb #>> '{custom_kernel,kernel_type}',"
    " request::jsonb #>> '{kernel,kernel_type}')";

// The channel the nodes' events travel on ("queued:<id>", "done:<id>", "cancel:<id>").
inline constexpr std::string_view kChannel = "kforge_jobs";
inline constexpr std::string_view kColumns =
    "id, kind, state, request, result, device, error, attempts, created_ms, started_ms, "
    "finished_ms, submitter";
// kColumns without the request (a claim does not need it: run_job reads it back).
inline constexpr std::string_view kColumnsNoRequest =
    "id, kind, state, NULL, result, device, error, attempts, created_ms, started_ms, "
    "finished_ms, submitter";

// kColumns for a listing: the request and result cut to what it shows (Store::list_jobs).
std::string listed_columns();

// A JSON value as stored (invalid UTF-8 replaced, never thrown on).
std::string dump(const Json& value);
std::string state_name(model::JobState s);

// Decodes row `row` of a query selecting kColumns (or kColumnsNoRequest); a row that does
// not decode is kInternal, naming the job and the column.
StatusOr<model::JobRecord> decode_job(const pg::Rows& rows, int row);
StatusOr<std::vector<model::JobRecord>> decode_jobs(const pg::Rows& rows);

// kFailedPrecondition unless a job may go from `from` to `to`.
Status check_transition(const std::string& id, model::JobState from, model::JobState to);

// A PostgreSQL array literal of plain strings: {"cpu","gpu"}.
std::string text_array(const std::vector<std::string>& items);

struct Locked {
  model::JobState state;
  std::string owner;
  int attempts;
};

// The state, owner and attempts of job `id`, its row locked until the transaction ends.
StatusOr<Locked> lock_job(pg::Connection& conn, const std::string& id);

// Fencing: a running job only its lease holder may change (finish, requeue).
Status not_owner(const std::string& id, const std::string& node, const std::string& owner);

// Sends "<event>:<id>" on kChannel (delivered when the transaction commits).
Status notify(pg::Connection& conn, std::string_view event, const std::string& id);

}  // namespace kforge::store::job_rows
