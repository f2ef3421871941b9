// Revision 2026-07-28 ("modern"): the stateless era of MCP, served next to the initialize-based
// revisions (protocol.h) on the same transports.
//
// The body decides the era: a request whose params._meta holds
// "io.modelcontextprotocol/protocolVersion" is modern, and so is a request whose
// MCP-Protocol-Version header names 2026-07-28 or later (without the _meta claim it is then
// refused). Everything else keeps the 2025 path. A modern request carries its whole context:
//
//   params._meta["io.modelcontextprotocol/protocolVersion"]    required, a served version
//   params._meta["io.modelcontextprotocol/clientCapabilities"] required, an object
//   params._meta["io.modelcontextprotocol/clientInfo"]         optional
//   params._meta["io.modelcontextprotocol/logLevel"]           optional; no logs without it
//
// Validation order (each rejection a JSON-RPC error echoing the request id; the HTTP status is
// the transport's): _meta shape (-32602) -> the MCP-Protocol-Version header matches _meta
// (-32020, HTTP only) -> the version is served (-32022, data {supported, requested}) ->
// Mcp-Method / Mcp-Name / Mcp-Param-* headers (-32020, http_headers.h) -> the method exists at
// 2026-07-28 (-32601) -> client capabilities the call needs (-32021, data
// {requiredCapabilities}).
//
// Every result gets "resultType" ("complete" unless the handler set one) and
// _meta["io.modelcontextprotocol/serverInfo"]; the cacheable results (server/discover, the
// list methods, resources/read, skills/*) get caching hints: ttlMs and cacheScope.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/frontends/mcp/protocol/protocol.h"
#include "kforge/frontends/mcp/protocol/request_context.h"

namespace kforge::frontends::mcp::modern {

inline constexpr std::string_view kVersion = "2026-07-28";

inline constexpr std::string_view kMetaProtocolVersion = "io.modelcontextprotocol/protocolVersion";
inline constexpr std::string_view kMetaClientCapabilities =
    "io.modelcontextprotocol/clientCapabilities";
inline constexpr std::string_view kMetaClientInfo = "io.modelcontextprotocol/clientInfo";
inline constexpr std::string_view kMetaLogLevel = "io.modelcontextprotocol/logLevel";
inline constexpr std::string_view kMetaServerInfo = "io.modelcontextprotocol/serverInfo";

// Error codes of 2026-07-28.
inline constexpr int kHeaderMismatch = -32020;
inline constexpr int kMissingRequiredClientCapability = -32021;
inline constexpr int kUnsupportedProtocolVersion = -32022;

// The modern revisions served (server/discover supportedVersions), newest first.
const std::vector<std::string_view>& supported_versions();
// A version string at or after 2026-07-28 (a date-shaped string ordering after it).
bool names_modern_version(std::string_view version);
// Whether `body` (one JSON-RPC message) carries the modern _meta claim.
bool claims_modern(const Json& body);

// A refused modern request: the JSON-RPC error and the HTTP status it travels with.
struct Rejection {
  int http_status = 400;
  int code = 0;
  std::string message;
  std::optional<Json> data;
};

// The context of one modern request, read from params._meta.
struct RequestMeta {
  std::string version;
  Json client_capabilities = Json::object();
  Json client_info = Json::object();
  std::optional<LogLevel> log_level;
};

// Ladder step "_meta shape": the required keys with the right types (-32602).
std::optional<Rejection> check_meta_shape(const Json& params);
// Ladder step "version served" (-32022 with data {supported, requested}).
std::optional<Rejection> check_version(std::string_view version);
// Reads a request that passed both checks; an invalid logLevel is -32602.
StatusOr<RequestMeta> read_meta(const Json& params);

// The HTTP status of a JSON-RPC error on the modern path once the ladder passed: -32601 is
// 404, -32021 400, anything else (handler errors) 200.
int http_status_for_error(int code);

// What a result needs on the modern wire: resultType, serverInfo, and for `method` the
// caching hints (unless `retry`: a result answering inputResponses/requestState is never
// cached, and an input_required result carries no hints).
Json decorate_result(std::string_view method, Json result, const Json& server_info, bool retry);

// The ReplyChannel of a modern request: decorates the result (decorate_result), drops
// server->client requests (there are none at 2026-07-28) and passes the rest to `inner`.
std::shared_ptr<ReplyChannel> wrap_channel(std::shared_ptr<ReplyChannel> inner, std::string method,
                                           Json server_info, bool retry);

// Whether params carry an MRTR retry (inputResponses or requestState).
bool is_retry(const Json& params);

}  // namespace kforge::frontends::mcp::modern
