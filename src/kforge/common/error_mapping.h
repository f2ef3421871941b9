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

// The JSON error body every REST endpoint returns:
//   {"error": {"code": "invalid_argument", "message": "...", "field": "kernel.io"}}
// plus "detail": "<field>: <message>" (FastAPI-style, for old clients).
Json error_body(const Status& status);

}  // namespace kforge
