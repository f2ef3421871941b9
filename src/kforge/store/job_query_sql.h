// The WHERE and ORDER BY of a job listing (model/job_query.h) in SQL, shared by the SQLite and
// PostgreSQL stores: they differ only in how a parameter is written ("?" or "$n") and how the
// candidate's kernel_type is read from the stored request JSON. Internal to store/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/model/job_query.h"

namespace kforge::store {

// A bound parameter: text, or an integer (`text` then holds its decimal digits too).
struct SqlParam {
  std::string text;
  int64_t integer = 0;
  bool is_integer = false;

  static SqlParam of(std::string value) { return SqlParam{std::move(value), 0, false}; }
  static SqlParam of(int64_t value) { return SqlParam{std::to_string(value), value, true}; }
};

struct JobListSql {
  // " WHERE ... ORDER BY created_ms DESC, id DESC LIMIT <n>" (WHERE omitted when nothing
  // filters), to append to a SELECT of the jobs table.
  std::string tail;
  std::vector<SqlParam> params;  // in placeholder order
};

// How a dialect builds JSON: SQLite's json_object and `result -> '$.name'`, PostgreSQL's
// jsonb_build_object, `result::jsonb -> 'name'` and a cast back to text.
struct JsonSqlDialect {
  std::string_view object_function;
  std::function<std::string(std::string_view)> result_member;  // JSON, NULL when absent
  std::string_view as_text;                                    // appended to a built object
};

// The two columns that replace `request` and `result` in a listing (Store::list_jobs):
// {"kernel": {"kernel_type": ...}} and the result's listed members (NULL without a result).
std::string listed_request_sql(std::string_view kernel_type_sql, const JsonSqlDialect& dialect);
std::string listed_result_sql(const JsonSqlDialect& dialect);

// `placeholder(i)` writes the i-th parameter (1-based); `kernel_type_sql` is an expression of
// the candidate's kernel_type (NULL when the request has none). kInvalidArgument (field
// "limit") for a limit below 1.
StatusOr<JobListSql> job_list_sql(const model::JobQuery& query, std::string_view kernel_type_sql,
                                  const std::function<std::string(int)>& placeholder);

}  // namespace kforge::store
