// The Streamable HTTP transport (MCP 2025-11-25, also serving 2025-06-18 and 2025-03-26, and
// the stateless 2026-07-28) on one path of kforge's HTTP server, next to the REST routes on
// the same port.
//
// The body decides the era (modern.h): a POST whose params._meta claims a protocol version, or
// whose MCP-Protocol-Version names 2026-07-28 or later, is served statelessly (no session;
// the validation ladder of modern.h and http_headers.h, each rejection JSON with the id
// echoed: 400 for _meta, header and version errors and -32021, 404 for methods that do not
// exist at 2026-07-28; closing the connection cancels the request; no event ids). Anything
// else takes the 2025 path below, unchanged.
//
//   POST   one JSON-RPC message (or, in 2025-03-26 sessions, a batch). A request is answered
//          with application/json, or with a text/event-stream when the client accepts it and
//          the request carries a progressToken, calls a long-running tool, or produces
//          notifications (logging, sampling) before its response, or when the client accepts
//          only text/event-stream. Notifications and responses get 202 with an empty body.
//   GET    an SSE stream for messages outside any request (a second GET replaces the first
//          stream instead of answering 409); with Last-Event-ID, the rest of one of the
//          session's POST streams (resumable_streams.h).
//   DELETE ends the session (200).
//
// Sessions: `initialize` creates one and its response carries `Mcp-Session-Id` (a stale id on
// an initialize is ignored, a new one is minted). Limits (session_store.h): a flood of
// `initialize` only ever replaces sessions that were never used; when full, 503 (429 for one
// client's cap) with Retry-After. Other requests need the header: missing ->
// 400 (-32000), unknown or ended -> 404 (-32001). Errors echo the request's id when readable.
// `MCP-Protocol-Version`: a present, unsupported value -> 400; any supported value is accepted
// (absent means 2025-03-26); the session keeps what `initialize` negotiated.
// Accept is read leniently: missing, `*/*` or JSON-only gets JSON; 406 only when it excludes
// both JSON and SSE. A Content-Type other than JSON -> 415. Malformed JSON, or JSON nested
// deeper than --max-json-depth (common/json.h), -> 400 (-32700);
// an invalid message -> 400 (-32600). Origin/Host checks, CORS, the token and the body limit
// are the HTTP server's (access_policy.h); they apply before these handlers run.
// In a 2025 session a client disconnect is not a cancellation: only notifications/cancelled
// cancels. SSE events are `event: message` with one compact JSON `data:` line; idle streams
// get `: keep-alive` comments. A 2025 session's POST streams are resumable: a priming event
// (id, empty data, retry hint) and an id on every event.
//
// Threading: handlers run on the io thread only to check headers; parsing and dispatch run on
// the blocking executor.
#pragma once

#include <chrono>
#include <string>

#include "kforge/common/status.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/http/router.h"
#include "kforge/frontends/mcp/protocol/dispatcher.h"
#include "kforge/frontends/mcp/protocol/session_store.h"

namespace kforge::frontends::mcp {

struct HttpTransportOptions {
  std::string path = "/mcp";
  SessionStore::Options sessions;
  std::chrono::milliseconds keepalive_interval{std::chrono::seconds(15)};
};

// Registers POST, GET and DELETE on `options.path`. `dispatcher` and the pool behind
// `blocking` must outlive the server and every task it posted. Fails only if the routes
// already exist.
Status add_mcp_routes(http::Router& router, const Dispatcher& dispatcher,
                      http::BlockingExecutor blocking, HttpTransportOptions options = {});

}  // namespace kforge::frontends::mcp
