// The one error type of kforge.
//
// Every fallible operation returns `Status` or `StatusOr<T>`; both are [[nodiscard]].
// Foreign error codes (errno, sqlite, CUresult, nvrtcResult, ...) are converted into a
// Status in exactly one place per family. Errors caused by untrusted input carry the
// JSON path of the offending field (`field_path`), so frontends can name it.
//
// Example:
//   StatusOr<int> parse_port(std::string_view s);
//   KF_ASSIGN_OR_RETURN(int port, parse_port(text));
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kforge {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // malformed request or option; field_path names the field
  kNotFound,         // unknown job, session, file
  kAlreadyExists,
  kPayloadTooLarge,     // request body over the configured limit
  kUnauthenticated,     // missing or wrong API token
  kPermissionDenied,    // e.g. disallowed Origin
  kFailedPrecondition,  // operation not allowed in the current state
  kResourceExhausted,   // queue full, memory limit
  kUnavailable,         // no device, worker not running, shutting down
  kDeadlineExceeded,    // timeout
  kCancelled,
  kUnimplemented,
  kInternal,  // a bug or an unexpected failure of our own
  kIo,        // file system / socket failure
};

// Stable lower_snake name of a code, used in JSON error bodies and logs.
std::string_view error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(ErrorCode code, std::string message, std::string field_path = {})
      : code_(code), message_(std::move(message)), field_path_(std::move(field_path)) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // JSON path of the field that caused an input error ("kernel.io.args[2].tensor_spec.shape"),
  // empty when the error is not about one field.
  const std::string& field_path() const { return field_path_; }

  // "field.path: message" when a path is present, otherwise the message.
  std::string to_string() const;

  // Returns a copy whose message is prefixed with `context` ("context: message").
  Status with_context(std::string_view context) const;

  // Explicitly discards the status where ignoring an error is the intended behaviour.
  void ignore() const {}

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
  std::string field_path_;
};

// Shorthands for the common codes.
Status invalid_argument(std::string message, std::string field_path = {});
Status not_found(std::string message);
Status failed_precondition(std::string message);
Status unavailable(std::string message);
Status internal_error(std::string message);
Status io_error(std::string message);
// errno-based I/O error: "<what>: <strerror(err)>".
Status errno_error(std::string_view what, int err);

// An invariant broke: logs "kforge: invariant failed at FILE:LINE: WHAT" to stderr and aborts,
// in every build (KF_CHECK; StatusOr::value() on an error). Never returns.
[[noreturn]] void invariant_failed(const char* file, int line, std::string_view what);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (status_.is_ok()) {
      invariant_failed(__FILE__, __LINE__, "StatusOr built from an OK status without a value");
    }
  }

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }

  // On an error: invariant_failed (abort) in every build, naming the status.
  T& value() & {
    check_ok();
    return *value_;
  }
  const T& value() const& {
    check_ok();
    return *value_;
  }
  T&& value() && {
    check_ok();
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void check_ok() const {
    if (!is_ok()) invariant_failed(__FILE__, __LINE__, "value() of " + status_.to_string());
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace kforge

// KF_CHECK(cond, what): an invariant that must hold in every build; on failure logs the
// condition, `what` (a string) and the place, and aborts.
#define KF_CHECK(cond, what)                                                              \
  do {                                                                                    \
    if (!(cond))                                                                          \
      ::kforge::invariant_failed(__FILE__, __LINE__, std::string(#cond) + ": " + (what)); \
  } while (false)

#define KF_STATUS_CONCAT_INNER(a, b) a##b
#define KF_STATUS_CONCAT(a, b) KF_STATUS_CONCAT_INNER(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define KF_RETURN_IF_ERROR(expr)                        \
  do {                                                  \
    ::kforge::Status kf_status_tmp_ = (expr);           \
    if (!kf_status_tmp_.is_ok()) return kf_status_tmp_; \
  } while (false)

// `KF_ASSIGN_OR_RETURN(auto x, make_x());` declares x or returns the error.
#define KF_ASSIGN_OR_RETURN(lhs, expr) \
  KF_ASSIGN_OR_RETURN_IMPL(KF_STATUS_CONCAT(kf_statusor_, __LINE__), lhs, expr)
// `lhs` is a declaration or an lvalue, so it cannot be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define KF_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.is_ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
