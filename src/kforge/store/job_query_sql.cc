#include "kforge/store/job_query_sql.h"

namespace kforge::store {

std::string listed_request_sql(std::string_view kernel_type_sql, const JsonSqlDialect& dialect) {
  const std::string object(dialect.object_function);
  return object + "('kernel', " + object + "('kernel_type', " + std::string(kernel_type_sql) +
         "))" + std::string(dialect.as_text);
}

std::string listed_result_sql(const JsonSqlDialect& dialect) {
  std::string members;
  for (std::string_view name : {"compiled", "correctness", "runtime", "runtime_stats", "speedup",
                                "speedup_verdict", "error_kind"}) {
    if (!members.empty()) members += ", ";
    members += "'" + std::string(name) + "', " + dialect.result_member(name);
  }
  return "CASE WHEN result IS NULL THEN NULL ELSE " + std::string(dialect.object_function) + "(" +
         members + ")" + std::string(dialect.as_text) + " END";
}

StatusOr<JobListSql> job_list_sql(const model::JobQuery& query, std::string_view kernel_type_sql,
                                  const std::function<std::string(int)>& placeholder) {
  if (query.limit < 1) return invalid_argument("must be at least 1", "limit");
  JobListSql out;
  std::vector<std::string> clauses;
  auto param = [&out, &placeholder](auto value) {
    out.params.push_back(SqlParam::of(std::move(value)));
    return placeholder(static_cast<int>(out.params.size()));
  };
  if (!query.states.empty()) {
    std::string in;
    for (model::JobState s : query.states) {
      if (!in.empty()) in += ", ";
      in += param(std::string(model::to_string(s)));
    }
    clauses.push_back("state IN (" + in + ")");
  }
  if (query.kernel_type) {
    clauses.push_back(std::string(kernel_type_sql) + " = " + param(*query.kernel_type));
  }
  if (query.device) clauses.push_back("device = " + param(*query.device));
  if (query.submitter) clauses.push_back("submitter = " + param(*query.submitter));
  if (query.created_from_ms) clauses.push_back("created_ms >= " + param(*query.created_from_ms));
  if (query.created_before_ms) {
    clauses.push_back("created_ms < " + param(*query.created_before_ms));
  }
  if (query.after) {
    const std::string before = param(query.after->created_ms);
    const std::string same = param(query.after->created_ms);
    const std::string id = param(query.after->id);
    clauses.push_back("(created_ms < " + before + " OR (created_ms = " + same + " AND id < " + id +
                      "))");
  }
  for (size_t i = 0; i < clauses.size(); ++i) {
    out.tail += (i == 0 ? " WHERE " : " AND ") + clauses[i];
  }
  out.tail += " ORDER BY created_ms DESC, id DESC LIMIT " + std::to_string(query.limit);
  return out;
}

}  // namespace kforge::store
