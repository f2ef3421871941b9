// The method table, lifecycle and tools. Resources, prompts and completions are in
// dispatcher_catalog.cc.
#include "kforge/frontends/mcp/protocol/dispatcher.h"

#include <exception>

#include "kforge/common/log.h"
#include "kforge/frontends/mcp/protocol/json_schema.h"
#include "kforge/frontends/mcp/protocol/modern.h"
#include "kforge/frontends/mcp/protocol/pagination.h"

namespace kforge::frontends::mcp {
namespace {

using jsonrpc::kInvalidParams;
using jsonrpc::kInvalidRequest;
using jsonrpc::kMethodNotFound;

bool allowed_before_initialize(const std::string& method) {
  return method == "initialize" || method == "ping";
}

}  // namespace

Dispatcher::Dispatcher(const Catalog& catalog, BlockingExecutor executor, DispatchOptions options)
    : catalog_(catalog), executor_(std::move(executor)), options_(options) {}

bool Dispatcher::prefers_stream(const jsonrpc::Message& message) const {
  if (message.kind != jsonrpc::MessageKind::kRequest) return false;
  if (!progress_token_of(message.params).is_null()) return true;
  if (message.method != "tools/call") return false;
  const Json* name = jsonrpc::param(message.params, "name");
  if (name == nullptr || !name->is_string()) return false;
  const Tool* tool = catalog_.tools.find(name->get<std::string>());
  return tool != nullptr && tool->spec.long_running;
}

void Dispatcher::handle(const std::shared_ptr<Session>& session, const jsonrpc::Message& message,
                        std::shared_ptr<ReplyChannel> channel) const {
  switch (message.kind) {
    case jsonrpc::MessageKind::kNotification:
      handle_notification(*session, message);
      return;
    case jsonrpc::MessageKind::kResponse:
      handle_response(*session, message);
      return;
    case jsonrpc::MessageKind::kRequest:
      break;
  }
  auto ctx = std::make_shared<RequestContext>(session, message.id, message.method,
                                              progress_token_of(message.params), channel);
  ctx->set_params(message.params);
  if (Status s = session->begin_request(message.id, ctx); !s) {
    ctx->respond_error(kInvalidRequest, s.message());
    return;
  }
  ctx->mark_registered();
  try {
    handle_request(ctx, message.params);
  } catch (const std::exception& e) {
    KF_LOG_ERROR("mcp {} failed: {}", message.method, e.what());
    ctx->respond_error(jsonrpc::kInternalError, std::string("internal error: ") + e.what());
  }
}

bool Dispatcher::serves_stateless(const std::string& method) const {
  if (method == "server/discover" || method == "tools/list" || method == "tools/call") {
    return true;
  }
  if (!catalog_.resources.empty() &&
      (method == "resources/list" || method == "resources/templates/list" ||
       method == "resources/read")) {
    return true;
  }
  if (!catalog_.prompts.empty() && (method == "prompts/list" || method == "prompts/get")) {
    return true;
  }
  if (catalog_.extension_methods.count(method) != 0) return true;
  return catalog_.completion && method == "completion/complete";
}

void Dispatcher::handle_stateless(const std::shared_ptr<Session>& session,
                                  const jsonrpc::Message& message,
                                  std::shared_ptr<ReplyChannel> channel) const {
  if (message.kind != jsonrpc::MessageKind::kRequest) return;  // no client notifications
  if (!serves_stateless(message.method)) {
    channel->send_response(jsonrpc::make_error(message.id, kMethodNotFound,
                                               "Method not found: " + message.method +
                                                   " (at revision " +
                                                   std::string(modern::kVersion) + ")"));
    return;
  }
  handle(session, message,
         modern::wrap_channel(std::move(channel), message.method,
                              catalog_.server_info(session->effective_version()),
                              modern::is_retry(message.params)));
}

void Dispatcher::handle_request(const std::shared_ptr<RequestContext>& ctx,
                                const Json& params) const {
  const std::string& method = ctx->method();
  if (!ctx->session().protocol_version() && !allowed_before_initialize(method)) {
    ctx->respond_error(kInvalidRequest,
                       "the session is not initialized: send 'initialize' before '" + method + "'");
    return;
  }
  if (ctx->session().is_stateless()) {
    if (method == "server/discover") return discover(*ctx);
    if (auto ext = catalog_.extension_methods.find(method);
        ext != catalog_.extension_methods.end()) {
      return ext->second(*ctx, params);
    }
  }
  if (method == "initialize") return initialize(*ctx, params);
  if (method == "ping") return ctx->respond(Json::object());
  if (method == "logging/setLevel") return set_log_level(*ctx, params);
  if (method == "tools/list") return list_tools(*ctx, params);
  if (method == "tools/call") return call_tool(ctx, params);
  const bool resources = !catalog_.resources.empty();
  if (resources && method == "resources/list") return list_resources(*ctx, params, false);
  if (resources && method == "resources/templates/list") {
    return list_resources(*ctx, params, true);
  }
  if (resources && method == "resources/read") return read_resource(*ctx, params);
  if (resources && catalog_.resource_subscriptions &&
      (method == "resources/subscribe" || method == "resources/unsubscribe")) {
    return subscribe_resource(*ctx, params);
  }
  if (!catalog_.prompts.empty() && method == "prompts/list") return list_prompts(*ctx, params);
  if (!catalog_.prompts.empty() && method == "prompts/get") return get_prompt(*ctx, params);
  if (catalog_.completion && method == "completion/complete") return complete(*ctx, params);
  ctx->respond_error(kMethodNotFound, "Method not found: " + method);
}

void Dispatcher::handle_notification(Session& session, const jsonrpc::Message& message) const {
  if (message.method == "notifications/initialized") {
    session.mark_initialized_notification();
    return;
  }
  if (message.method == "notifications/cancelled") {
    const Json* id = jsonrpc::param(message.params, "requestId");
    if (id == nullptr) return;
    // Unknown or finished requests are ignored (the cancel may cross the response).
    if (auto ctx = session.find_request(*id); ctx != nullptr && ctx->method() != "initialize") {
      const Json* reason = jsonrpc::param(message.params, "reason");
      KF_LOG_DEBUG("mcp session {}: request {} cancelled by the client{}{}", session.id(),
                   id->dump(), reason != nullptr ? ": " : "",
                   reason != nullptr ? reason->dump() : "");
      ctx->cancel();
    }
    return;
  }
  // notifications/progress, notifications/roots/list_changed and unknown ones: nothing to do.
}

void Dispatcher::handle_response(Session& session, const jsonrpc::Message& message) const {
  StatusOr<Json> result = message.result;
  if (message.is_error_response()) {
    result = Status(ErrorCode::kUnavailable, "the client answered with error " +
                                                 message.error["code"].dump() + ": " +
                                                 message.error["message"].get<std::string>());
  }
  if (!session.deliver_client_response(message.id, std::move(result))) {
    KF_LOG_DEBUG("mcp session {}: response {} matches no request of the server", session.id(),
                 message.id.dump());
  }
}

void Dispatcher::initialize(RequestContext& ctx, const Json& params) const {
  if (ctx.session().protocol_version()) {
    ctx.respond_error(kInvalidRequest, "the session is already initialized");
    return;
  }
  if (!params.is_object()) {
    ctx.respond_error(kInvalidParams,
                      "initialize needs params {protocolVersion, capabilities, "
                      "clientInfo}");
    return;
  }
  const Json* requested = jsonrpc::param(params, "protocolVersion");
  if (requested == nullptr || !requested->is_string()) {
    ctx.respond_error(kInvalidParams, "protocolVersion: is required and must be a string");
    return;
  }
  std::string version = negotiate_protocol_version(*requested);
  const Json* caps = jsonrpc::param(params, "capabilities");
  const Json* client = jsonrpc::param(params, "clientInfo");
  ctx.session().set_initialized(version, caps != nullptr ? *caps : Json::object(),
                                client != nullptr ? *client : Json::object());
  Json result = {{"protocolVersion", version},
                 {"capabilities", catalog_.capabilities()},
                 {"serverInfo", catalog_.server_info(version)}};
  if (!catalog_.info.instructions.empty()) result["instructions"] = catalog_.info.instructions;
  KF_LOG_INFO("mcp session {} initialized: protocol {} (asked {}), client {}",
              ctx.session().id().empty() ? "stdio" : ctx.session().id(), version,
              requested->get<std::string>(), client != nullptr ? client->dump() : "unknown");
  ctx.respond(std::move(result));
}

void Dispatcher::discover(RequestContext& ctx) const {
  Json versions = Json::array();
  for (std::string_view v : modern::supported_versions())
    versions.push_back(v);
  Json caps = catalog_.capabilities();
  // resources/subscribe does not exist at 2026-07-28.
  if (caps.contains("resources")) caps["resources"].erase("subscribe");
  if (!catalog_.extensions.empty()) caps["extensions"] = catalog_.extensions;
  Json result = {{"supportedVersions", std::move(versions)}, {"capabilities", std::move(caps)}};
  if (!catalog_.info.instructions.empty()) result["instructions"] = catalog_.info.instructions;
  ctx.respond(std::move(result));
}

void Dispatcher::set_log_level(RequestContext& ctx, const Json& params) const {
  const Json* level = jsonrpc::param(params, "level");
  auto parsed = level != nullptr && level->is_string() ? log_level_from(level->get<std::string>())
                                                       : std::nullopt;
  if (!parsed) {
    ctx.respond_error(kInvalidParams,
                      "level: must be one of debug, info, notice, warning, error, critical, "
                      "alert, emergency");
    return;
  }
  ctx.session().set_log_level(*parsed);
  ctx.respond(Json::object());
}

void Dispatcher::list_tools(RequestContext& ctx, const Json& params) const {
  const auto& tools = catalog_.tools.tools();
  auto page = paginate("tools", tools.size(), params, options_.page_size);
  if (!page.is_ok()) return ctx.respond_status(page.status());
  const std::string version = ctx.protocol_version();
  Json listed = Json::array();
  for (size_t i = page->begin; i < page->end; ++i) {
    listed.push_back(tool_listing(tools[i].spec, version));
  }
  Json result = {{"tools", std::move(listed)}};
  if (page->next_cursor) result["nextCursor"] = *page->next_cursor;
  ctx.respond(std::move(result));
}

void Dispatcher::call_tool(const std::shared_ptr<RequestContext>& ctx, const Json& params) const {
  const Json* name = jsonrpc::param(params, "name");
  if (name == nullptr || !name->is_string()) {
    ctx->respond_error(kInvalidParams, "name: is required and must be the name of a tool");
    return;
  }
  const Tool* tool = catalog_.tools.find(name->get<std::string>());
  if (tool == nullptr) {
    ctx->respond_error(kInvalidParams, "Unknown tool: " + name->get<std::string>());
    return;
  }
  Json arguments = Json::object();
  if (auto it = params.find("arguments"); it != params.end() && !it->is_null()) {
    if (!it->is_object()) {
      ctx->respond_error(kInvalidParams,
                         "arguments: must be an object, got " + std::string(json_type_name(*it)));
      return;
    }
    arguments = *it;
  }
  if (tool->spec.normalize_arguments) {
    arguments = tool->spec.normalize_arguments(std::move(arguments));
  }
  auto call = std::make_shared<ToolCall>(tool->spec.name, std::move(arguments), ctx);
  if (Status valid = validate_json(tool->spec.input_schema, call->arguments()); !valid) {
    call->finish(
        ToolResult::error("Invalid arguments for " + tool->spec.name + ": " + valid.to_string()));
    return;
  }
  executor_([tool, call] {
    if (call->context().finished()) return;  // cancelled while queued
    try {
      tool->handler(call);
    } catch (const std::exception& e) {
      KF_LOG_ERROR("mcp tool {} threw: {}", call->tool_name(), e.what());
      call->finish(
          ToolResult::error("kforge failed to run " + call->tool_name() + ": " + e.what()));
    }
  });
}

}  // namespace kforge::frontends::mcp
