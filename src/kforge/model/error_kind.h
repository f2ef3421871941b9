// The result's `error_kind` (docs/worker-protocol.md "Result"): the one list both workers and
// the supervisor use. tests/protocol/error_kinds.json holds the same list; a gtest and a
// pytest (judge/results.py ERROR_KINDS) each check theirs against it.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace kforge::model {

enum class ErrorKind {
  kCompile,      // the source does not import/compile (compiled=false)
  kRuntime,      // an exception or a CUDA error while running
  kMismatch,     // ran but wrong
  kTimeout,      // the supervisor killed the job at its timeout
  kCrash,        // a signal or an unexpected exit
  kMemoryLimit,  // the job's processes went over their memory limit
  kCancelled,    // the client (or the server's shutdown) cancelled it while it ran
  kWorker,       // the worker itself failed (bad spec, protocol error, NVRTC missing)
};

inline constexpr std::array<ErrorKind, 8> kErrorKinds = {
    ErrorKind::kCompile, ErrorKind::kRuntime,     ErrorKind::kMismatch,  ErrorKind::kTimeout,
    ErrorKind::kCrash,   ErrorKind::kMemoryLimit, ErrorKind::kCancelled, ErrorKind::kWorker};

std::string_view to_string(ErrorKind kind);
std::optional<ErrorKind> error_kind_from(std::string_view name);

}  // namespace kforge::model
