#include "kforge/store/postgres/job_rows.h"

#include <optional>
#include <utility>

#include "kforge/store/job_query_sql.h"

namespace kforge::store::job_rows {

using model::JobRecord;
using model::JobState;
using pg::Rows;

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

}  // namespace kforge::store::job_rows
