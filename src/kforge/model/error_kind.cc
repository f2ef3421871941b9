#include "kforge/model/error_kind.h"

namespace kforge::model {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kCompile:
      return "compile";
    case ErrorKind::kRuntime:
      return "runtime";
    case ErrorKind::kMismatch:
      return "mismatch";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kCrash:
      return "crash";
    case ErrorKind::kMemoryLimit:
      return "memory_limit";
    case ErrorKind::kCancelled:
      return "cancelled";
    case ErrorKind::kWorker:
      return "worker";
  }
  return "worker";
}

std::optional<ErrorKind> error_kind_from(std::string_view name) {
  for (ErrorKind k : kErrorKinds) {
    if (to_string(k) == name) return k;
  }
  return std::nullopt;
}

}  // namespace kforge::model
