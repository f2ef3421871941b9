// The one table that maps kforge error codes to HTTP status codes and JSON-RPC error codes.
#pragma once

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge {

// HTTP status for a failed request with this code (400, 401, 403, 404, 409, 413, 429, 5xx).
int http_status_for(ErrorCode code);

// JSON-RPC 2.0 error code for a failed MCP request with this code
// (-32602 invalid params, -32601 method not found, -32603 internal, ...).
int jsonrpc_code_for(ErrorCode code);

// The JSON error body every REST endpoint returns, in the kernel evaluation server's shape
// (`error` a string, `status` "client_error" for a bad request, else "error") with kforge's
// details beside it:
//   {"error": "kernel.io: is required", "status": "client_error", "code": "invalid_argument",
//    "message": "is required", "field": "kernel.io", "detail": "kernel.io: is required",
//    "validation_errors": [{"field": "kernel.io", "message": "is required",
//                           "type": "invalid_argument"}]}
// `field` and `validation_errors` only when the error is about one field. `http_status`
// defaults to http_status_for(status.code()).
Json error_body(const Status& status, int http_status = 0);

}  // namespace kforge
