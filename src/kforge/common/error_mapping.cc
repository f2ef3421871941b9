#include "kforge/common/error_mapping.h"

namespace kforge {

int http_status_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return 200;
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kUnauthenticated:
      return 401;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kFailedPrecondition:
      return 409;
    case ErrorCode::kPayloadTooLarge:
      return 413;
    case ErrorCode::kResourceExhausted:
      return 429;
    case ErrorCode::kCancelled:
      return 499;
    case ErrorCode::kUnimplemented:
      return 501;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kDeadlineExceeded:
      return 504;
    case ErrorCode::kInternal:
    case ErrorCode::kIo:
      return 500;
  }
  return 500;
}

int jsonrpc_code_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
      return -32602;
    case ErrorCode::kUnimplemented:
      return -32601;
    default:
      return -32603;
  }
}

Json error_body(const Status& status, int http_status) {
  if (http_status == 0) http_status = http_status_for(status.code());
  const bool client_error = http_status >= 400 && http_status < 500 && http_status != 404;
  const std::string code(error_code_name(status.code()));
  Json body = {{"error", status.to_string()},
               {"status", client_error ? "client_error" : "error"},
               {"code", code},
               {"message", status.message()},
               {"detail", status.to_string()}};
  if (!status.field_path().empty()) {
    body["field"] = status.field_path();
    body["validation_errors"] = Json::array(
        {{{"field", status.field_path()}, {"message", status.message()}, {"type", code}}});
  }
  return body;
}

}  // namespace kforge
