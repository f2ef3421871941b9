// The request headers of revision 2026-07-28 on Streamable HTTP (SEP-2243), checked against the
// body of a modern request (modern.h). Every mismatch is JSON-RPC -32020 (HeaderMismatch) with
// HTTP 400:
//
//   MCP-Protocol-Version  required; equals params._meta protocolVersion
//   Mcp-Method            required; equals the body's `method`
//   Mcp-Name              required for tools/call and prompts/get (= params.name),
//                         resources/read (= params.uri) and tasks/get|update|cancel
//                         (= params.taskId); not demanded elsewhere
//   Mcp-Param-<Name>      for each tools/call argument whose inputSchema property carries
//                         "x-mcp-header": "<Name>" (string, integer or boolean, reached through
//                         `properties` only): present exactly when the argument is (not null),
//                         and equal to it (integers compared as numbers)
//
// Names are case-insensitive; values are case-sensitive and compared after trimming spaces and
// tabs. `Mcp-Name` and `Mcp-Param-*` values may be "=?base64?<standard base64>?=" (lowercase
// markers, padded base64 of UTF-8), decoded before the comparison; malformed base64 inside the
// markers is a mismatch, and a value without both markers is literal.
#pragma once

#include <optional>
#include <string>

#include "kforge/common/json.h"
#include "kforge/frontends/http/http_message.h"
#include "kforge/frontends/mcp/protocol/modern.h"

namespace kforge::frontends::mcp {

// MCP-Protocol-Version against the _meta version.
std::optional<modern::Rejection> check_version_header(const http::HttpRequest& request,
                                                      std::string_view meta_version);
// Mcp-Method and Mcp-Name against the body.
std::optional<modern::Rejection> check_method_headers(const http::HttpRequest& request,
                                                      const std::string& method,
                                                      const Json& params);
// Mcp-Param-* of a tools/call against its arguments, per `input_schema`'s x-mcp-header marks.
std::optional<modern::Rejection> check_param_headers(const http::HttpRequest& request,
                                                     const Json& input_schema,
                                                     const Json& arguments);

// The header value as the client meant it: trimmed, and decoded from the base64 sentinel when
// it uses one; nullopt for a sentinel with malformed base64.
std::optional<std::string> decode_header_value(std::string_view raw);

}  // namespace kforge::frontends::mcp
