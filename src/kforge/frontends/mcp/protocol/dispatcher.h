// Dispatcher: the MCP method table, shared by every transport (http_transport.h,
// stdio_transport.h). A transport turns bytes into classified JSON-RPC messages and gives
// each request a ReplyChannel; the dispatcher does the rest:
//
//   initialize (version negotiation, capabilities), ping, logging/setLevel, tools/list,
//   tools/call, resources/list|read|templates/list|subscribe|unsubscribe, prompts/list|get,
//   completion/complete; notifications/initialized, notifications/cancelled; responses to the
//   server's own requests (sampling, elicitation).
//
// Revision 2026-07-28 (modern.h) goes through handle_stateless: the same methods on a
// one-request Session::stateless, without initialize, ping, logging/setLevel and
// resources/subscribe|unsubscribe, plus server/discover and the methods of the catalog's
// extensions (tasks/*, skills/*); results are decorated for that wire.
//
// Error policy: malformed requests and unknown methods or tools are JSON-RPC errors; invalid
// tool arguments and tool failures are tool results with isError (see tool.h). Requests other
// than initialize and ping before `initialize` are refused (-32600). A missing
// notifications/initialized is tolerated.
//
// Threading: handle() runs on the caller's thread and answers quick methods inline;
// tools/call handlers run on `executor` (they may block on disk, never on a job).
//
// Example:
//   Dispatcher dispatcher(catalog, executor);  // e.g. http::make_blocking_executor(pool)
//   dispatcher.handle(session, message, channel);
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "kforge/frontends/mcp/protocol/catalog.h"
#include "kforge/frontends/mcp/protocol/jsonrpc.h"
#include "kforge/frontends/mcp/protocol/request_context.h"
#include "kforge/frontends/mcp/protocol/session.h"

namespace kforge::frontends::mcp {

// Runs a task later on another thread, never inline; thread-safe. The same type as the
// REST server's executor, so one thread pool serves both.
using BlockingExecutor = std::function<void(std::function<void()> task)>;

struct DispatchOptions {
  // Entries per page of the list methods; the default puts every tool on one page, as many
  // clients never follow cursors.
  size_t page_size = 100;
};

class Dispatcher {
 public:
  // `catalog` must outlive the dispatcher and every task it posts to `executor`.
  Dispatcher(const Catalog& catalog, BlockingExecutor executor, DispatchOptions options = {});

  // Handles one message of `session`. A request is answered through `channel` exactly once
  // (unless it is cancelled); notifications and responses do not use it (may be null).
  void handle(const std::shared_ptr<Session>& session, const jsonrpc::Message& message,
              std::shared_ptr<ReplyChannel> channel) const;

  // A request of revision 2026-07-28 (modern.h) on `session` (Session::stateless), after the
  // transport checked its _meta and headers: the method must exist at that revision (else
  // -32601), and the result is decorated for the modern wire.
  void handle_stateless(const std::shared_ptr<Session>& session, const jsonrpc::Message& message,
                        std::shared_ptr<ReplyChannel> channel) const;
  // Whether `method` exists at revision 2026-07-28 on this catalog.
  bool serves_stateless(const std::string& method) const;

  // Whether the answer to `message` should stream from its start on HTTP: a request with a
  // progressToken, or a tools/call of a long-running tool.
  bool prefers_stream(const jsonrpc::Message& message) const;

  const Catalog& catalog() const { return catalog_; }

 private:
  void handle_request(const std::shared_ptr<RequestContext>& ctx, const Json& params) const;
  void handle_notification(Session& session, const jsonrpc::Message& message) const;
  void handle_response(Session& session, const jsonrpc::Message& message) const;

  void initialize(RequestContext& ctx, const Json& params) const;
  void discover(RequestContext& ctx) const;
  void set_log_level(RequestContext& ctx, const Json& params) const;
  void list_tools(RequestContext& ctx, const Json& params) const;
  void call_tool(const std::shared_ptr<RequestContext>& ctx, const Json& params) const;
  void list_resources(RequestContext& ctx, const Json& params, bool templates) const;
  void read_resource(RequestContext& ctx, const Json& params) const;
  void subscribe_resource(RequestContext& ctx, const Json& params) const;
  void list_prompts(RequestContext& ctx, const Json& params) const;
  void get_prompt(RequestContext& ctx, const Json& params) const;
  void complete(RequestContext& ctx, const Json& params) const;

  const Catalog& catalog_;
  const BlockingExecutor executor_;
  const DispatchOptions options_;
};

}  // namespace kforge::frontends::mcp
