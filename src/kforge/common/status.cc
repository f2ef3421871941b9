#include "kforge/common/status.h"

#include <cstdio>
#include <cstdlib>

#include "kforge/common/errno_message.h"

namespace kforge {

void invariant_failed(const char* file, int line, std::string_view what) {
  std::fprintf(stderr, "kforge: invariant failed at %s:%d: %.*s\n", file, line,
               static_cast<int>(what.size()), what.data());
  std::fflush(stderr);
  std::abort();
}

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kAlreadyExists:
      return "already_exists";
    case ErrorCode::kPayloadTooLarge:
      return "payload_too_large";
    case ErrorCode::kUnauthenticated:
      return "unauthenticated";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kFailedPrecondition:
      return "failed_precondition";
    case ErrorCode::kResourceExhausted:
      return "resource_exhausted";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kUnimplemented:
      return "unimplemented";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kIo:
      return "io";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  if (field_path_.empty()) return message_;
  return field_path_ + ": " + message_;
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_, field_path_);
}

Status invalid_argument(std::string message, std::string field_path) {
  return {ErrorCode::kInvalidArgument, std::move(message), std::move(field_path)};
}
Status not_found(std::string message) {
  return {ErrorCode::kNotFound, std::move(message)};
}
Status failed_precondition(std::string message) {
  return {ErrorCode::kFailedPrecondition, std::move(message)};
}
Status unavailable(std::string message) {
  return {ErrorCode::kUnavailable, std::move(message)};
}
Status internal_error(std::string message) {
  return {ErrorCode::kInternal, std::move(message)};
}
Status io_error(std::string message) {
  return {ErrorCode::kIo, std::move(message)};
}

Status errno_error(std::string_view what, int err) {
  return {ErrorCode::kIo, std::string(what) + ": " + errno_message(err)};
}

}  // namespace kforge
