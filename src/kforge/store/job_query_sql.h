// The WHERE and ORDER BY of a job listing (model/job_query.h) in SQL, shared by the SQLite and
// PostgreSQL stores: they differ only in how a parameter is written ("?" or "$n") and how the
// candidate's kernel_type is read from the stored request JSON. Internal to store/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/model/job_query.h"

namespace kforge::store {

using SqlParam = std::variant<std::string, int64_t>;

struct JobListSql {
  // " WHERE ... ORDER BY created_ms DESC, id DESC LIMIT <n>" (WHERE omitted when nothing
  // filters), to append to a SELECT of the jobs table.
  std::string tail;
  std::vector<SqlParam> params;  // in placeholder order
};

// `placeholder(i)` writes the i-th parameter (1-based); `kernel_type_sql` is an expression of
// the candidate's kernel_type (NULL when the request has none). kInvalidArgument (field
// "limit") for a limit below 1.
StatusOr<JobListSql> job_list_sql(const model::JobQuery& query, std::string_view kernel_type_sql,
                                  const std::function<std::string(int)>& placeholder);

}  // namespace kforge::store
