#include "kforge/model/request.h"

namespace kforge::model {

std::string_view to_string(JobKind k) {
  switch (k) {
    case JobKind::kEvaluate:
      return "evaluate";
    case JobKind::kCompare:
      return "compare";
  }
  return "unknown";
}

std::optional<JobKind> job_kind_from(std::string_view s) {
  if (s == "evaluate") return JobKind::kEvaluate;
  if (s == "compare") return JobKind::kCompare;
  return std::nullopt;
}

}  // namespace kforge::model
