// JSON-RPC 2.0 messages as MCP uses them: requests, notifications and responses, each one JSON
// object (batches are arrays of them; see batch.h). No transport and no MCP semantics here.
//
// Rules enforced by `classify` (spec: "every message is JSON-RPC 2.0"):
// - an object with "jsonrpc": "2.0";
// - a request has a string "method" and an "id" that is a string or a number (never null;
//   fractional numbers are accepted, as JSON-RPC 2.0 allows);
//   a notification has a "method" and no "id"; "params", when present, is an object;
// - a response has an "id" (string, number, or null for errors) and exactly one of "result"
//   and "error" (an object with an integer "code" and a string "message").
//
// Example:
//   KF_ASSIGN_OR_RETURN(Message m, classify(json));
//   if (m.kind == MessageKind::kRequest) send(make_result(m.id, Json::object()));
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::frontends::mcp::jsonrpc {

// Error codes (JSON-RPC 2.0, plus the ones MCP and its SDKs use).
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
inline constexpr int kRequestCancelled = -32800;  // a server->client request that was dropped
// Streamable HTTP transport errors (the TypeScript SDK's codes): a request without the
// Mcp-Session-Id header, and an unknown or terminated session.
inline constexpr int kSessionRequired = -32000;
inline constexpr int kSessionNotFound = -32001;
// resources/read of an unknown URI (2025-11-25 schema).
inline constexpr int kResourceNotFound = -32002;

enum class MessageKind { kRequest, kNotification, kResponse };

struct Message {
  MessageKind kind = MessageKind::kRequest;
  Json id;             // requests and responses; null for notifications
  std::string method;  // requests and notifications
  Json params;         // object, or null when absent
  Json result;         // successful responses
  Json error;          // error responses: {code, message, data?}; null otherwise

  bool is_error_response() const { return kind == MessageKind::kResponse && !error.is_null(); }
};

// Validates one message. kInvalidArgument with a message naming what is wrong.
StatusOr<Message> classify(const Json& value);

// The "id" of a value that failed `classify`, when it can still be read (a string or a
// number); null otherwise. Error responses to invalid messages echo it.
Json readable_id(const Json& value);

// A stable map key for a request id: "1" and 1 are different ids.
std::string id_key(const Json& id);

Json make_result(const Json& id, Json result);
Json make_error(const Json& id, int code, std::string message, std::optional<Json> data = {});
Json make_notification(std::string method, Json params);
Json make_request(const Json& id, std::string method, Json params);

// An error response for a failed Status: the code from error_mapping.h, the message
// "field: reason", and data {"field": ...} when the status names a field.
Json make_error_from(const Json& id, const Status& status);

// `params[key]` when params is an object holding it (and it is not null), else nullptr.
const Json* param(const Json& params, std::string_view key);

}  // namespace kforge::frontends::mcp::jsonrpc
