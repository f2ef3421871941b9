#include "kforge/frontends/mcp/http_transport.h"

#include <algorithm>
#include <memory>

#include "kforge/common/error_mapping.h"
#include "kforge/common/log.h"
#include "kforge/frontends/mcp/http_headers.h"
#include "kforge/frontends/mcp/http_reply_channel.h"
#include "kforge/frontends/mcp/protocol/batch.h"
#include "kforge/frontends/mcp/protocol/modern.h"
#include "kforge/frontends/mcp/protocol/protocol.h"
#include "kforge/frontends/mcp/session_principal.h"

namespace kforge::frontends::mcp {
namespace {

using http::HttpRequest;
using http::HttpResponse;
using http::Responder;

struct Endpoint {
  const Dispatcher& dispatcher;
  http::BlockingExecutor blocking;
  HttpTransportOptions options;
  SessionStore sessions;
  const std::shared_ptr<ResumableStreams> streams = std::make_shared<ResumableStreams>();

  Endpoint(const Dispatcher& d, http::BlockingExecutor b, HttpTransportOptions o)
      : dispatcher(d), blocking(std::move(b)), options(std::move(o)), sessions(options.sessions) {}
};
using EndpointPtr = std::shared_ptr<Endpoint>;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The media type of a header value: "Application/JSON; charset=utf-8" -> "application/json".
std::string media_type(std::string_view value) {
  value = value.substr(0, value.find(';'));
  while (!value.empty() && value.front() == ' ')
    value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ')
    value.remove_suffix(1);
  return lower(value);
}

struct AcceptInfo {
  bool json = true;  // JSON answers are acceptable (also when Accept is missing)
  bool sse = false;  // the client explicitly accepts text/event-stream
};

AcceptInfo read_accept(const HttpRequest& request) {
  const std::string* accept = request.header("accept");
  if (accept == nullptr || accept->find_first_not_of(' ') == std::string::npos) return {};
  AcceptInfo info{false, false};
  std::string_view rest(*accept);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string type = media_type(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (type == "application/json" || type == "application/*" || type == "*/*") info.json = true;
    if (type == "text/event-stream") info.sse = true;
  }
  return info;
}

HttpResponse rpc_error(int http_status, const Json& id, int code, std::string message) {
  return HttpResponse::json(http_status, jsonrpc::make_error(id, code, std::move(message)));
}

// An error on the 2026-07-28 path: the id echoed when readable, omitted otherwise.
HttpResponse modern_error(int http_status, const Json& id, int code, std::string message,
                          std::optional<Json> data = {}) {
  Json body = jsonrpc::make_error(id, code, std::move(message), std::move(data));
  if (id.is_null()) body.erase("id");
  return HttpResponse::json(http_status, body);
}

HttpResponse rejection(const Json& id, const modern::Rejection& r) {
  return modern_error(r.http_status, id, r.code, r.message, r.data);
}

HttpResponse accepted() {
  HttpResponse r;
  r.status = 202;
  r.content_type = "text/plain";
  return r;
}

// 400 for an unsupported MCP-Protocol-Version header value; nullopt when absent or supported.
// `id`: the request's id when readable (null for GET), echoed by the error.
std::optional<HttpResponse> check_protocol_header(const HttpRequest& request, const Json& id) {
  const std::string* version = request.header("mcp-protocol-version");
  if (version == nullptr || is_supported_protocol_version(*version)) return std::nullopt;
  std::string supported;
  for (std::string_view v : supported_protocol_versions()) {
    supported += supported.empty() ? std::string(v) : ", " + std::string(v);
  }
  return rpc_error(400, id, jsonrpc::kInvalidRequest,
                   "Bad Request: unsupported MCP-Protocol-Version '" + *version +
                       "' (supported: " + supported + ")");
}

// The session named by the Mcp-Session-Id header, or the 400/404 answer.
StatusOr<std::shared_ptr<Session>> session_for(Endpoint& ep, const HttpRequest& request,
                                               const Json& request_id,
                                               std::optional<HttpResponse>& refusal) {
  const std::string* id = request.header("mcp-session-id");
  if (id == nullptr || id->empty()) {
    refusal = rpc_error(400, request_id, jsonrpc::kSessionRequired,
                        "Bad Request: the Mcp-Session-Id header is required (send initialize "
                        "first to get one)");
    return invalid_argument("no session id");
  }
  // Another principal's session is answered as an unknown one: its tools act on that
  // principal's jobs.
  const SessionOwner owner = owner_of(request.principal);
  auto session = ep.sessions.find(*id, &owner);
  if (!session.is_ok()) {
    refusal = rpc_error(404, request_id, jsonrpc::kSessionNotFound,
                        "Session not found: " + session.status().message());
  }
  return session;
}

void handle_batch(const EndpointPtr& ep, const std::shared_ptr<Session>& session, const Json& batch,
                  const Responder& responder) {
  if (Status s = check_batch(batch, session->effective_version()); !s) {
    responder.send(rpc_error(400, nullptr, jsonrpc::kInvalidRequest, s.message()));
    return;
  }
  std::vector<jsonrpc::Message> requests;
  std::vector<Json> errors;
  std::vector<jsonrpc::Message> others;
  for (const Json& element : batch) {
    auto m = jsonrpc::classify(element);
    if (!m.is_ok()) {
      errors.push_back(jsonrpc::make_error(jsonrpc::readable_id(element), jsonrpc::kInvalidRequest,
                                           m.status().message()));
    } else if (m->kind == jsonrpc::MessageKind::kRequest) {
      requests.push_back(std::move(m).value());
    } else {
      others.push_back(std::move(m).value());
    }
  }
  for (const auto& m : others)
    ep->dispatcher.handle(session, m, nullptr);
  if (requests.empty() && errors.empty()) {
    responder.send(accepted());
    return;
  }
  auto collector = BatchCollector::create(
      requests.size() + errors.size(),
      [responder](const Json& responses) {
        responder.send(responses.empty() ? accepted() : HttpResponse::json(200, responses));
      },
      [session](const Json& related) { session->send_standalone(related); });
  for (Json& e : errors)
    collector->add(std::move(e));
  for (const auto& m : requests)
    ep->dispatcher.handle(session, m, collector->channel());
}

// A POST of revision 2026-07-28 (modern.h): the validation ladder, then a stateless dispatch.
// No session: Mcp-Session-Id is ignored and never minted. Closing the connection cancels.
void post_modern(const EndpointPtr& ep, const HttpRequest& request, const Json& json,
                 const Responder& responder, AcceptInfo accept) {
  const Json id = jsonrpc::readable_id(json);
  auto message = jsonrpc::classify(json);
  if (!message.is_ok()) {
    responder.send(modern_error(400, id, jsonrpc::kInvalidRequest,
                                "Invalid Request: " + message.status().message()));
    return;
  }
  if (message->kind != jsonrpc::MessageKind::kRequest) return responder.send(accepted());
  const std::string& method = message->method;
  const Json& params = message->params;
  if (auto bad = modern::check_meta_shape(params)) return responder.send(rejection(id, *bad));
  const std::string version =
      params.at("_meta").at(std::string(modern::kMetaProtocolVersion)).get<std::string>();
  if (auto bad = check_version_header(request, version)) {
    return responder.send(rejection(id, *bad));
  }
  if (auto bad = modern::check_version(version)) return responder.send(rejection(id, *bad));
  if (auto bad = check_method_headers(request, method, params)) {
    return responder.send(rejection(id, *bad));
  }
  if (!ep->dispatcher.serves_stateless(method)) {
    responder.send(modern_error(404, id, jsonrpc::kMethodNotFound,
                                "Method not found: " + method + " (at revision " + version + ")"));
    return;
  }
  if (method == "tools/call") {
    const Json* name = jsonrpc::param(params, "name");
    const Tool* tool = name != nullptr && name->is_string()
                           ? ep->dispatcher.catalog().tools.find(name->get<std::string>())
                           : nullptr;
    const Json* arguments = jsonrpc::param(params, "arguments");
    if (tool != nullptr) {
      if (auto bad = check_param_headers(request, tool->spec.input_schema,
                                         arguments != nullptr ? *arguments : Json::object())) {
        return responder.send(rejection(id, *bad));
      }
    }
  }
  auto meta = modern::read_meta(params);
  if (!meta.is_ok()) {
    responder.send(modern_error(400, id, jsonrpc::kInvalidParams, meta.status().message()));
    return;
  }
  auto session = Session::stateless(request.client, owner_of(request.principal), meta->version,
                                    meta->client_capabilities, meta->client_info, meta->log_level);
  auto channel = std::make_shared<HttpReplyChannel>(responder, accept.sse, session, false,
                                                    ep->options.keepalive_interval, nullptr);
  // A client that accepts only text/event-stream gets one.
  if (!accept.json || ep->dispatcher.prefers_stream(*message)) channel->start_stream();
  std::weak_ptr<Session> weak = session;
  responder.on_cancel([weak, request_id = message->id](http::CancelReason why, const Responder&) {
    if (why != http::CancelReason::kClientGone) return;  // a stopping server lets it finish
    if (auto s = weak.lock()) {
      if (auto ctx = s->find_request(request_id)) ctx->cancel();
    }
  });
  ep->dispatcher.handle_stateless(session, *message, channel);
}

// The part of POST that runs on the blocking executor.
void post_blocking(const EndpointPtr& ep, const HttpRequest& request, const Responder& responder,
                   AcceptInfo accept) {
  const std::string* header_version = request.header("mcp-protocol-version");
  const bool modern_header =
      header_version != nullptr && modern::names_modern_version(*header_version);
  auto body = parse_json(request.body);
  if (!body.is_ok()) {
    std::string why = "Parse error: " + body.status().message();
    responder.send(modern_header ? modern_error(400, nullptr, jsonrpc::kParseError, std::move(why))
                                 : rpc_error(400, nullptr, jsonrpc::kParseError, std::move(why)));
    return;
  }
  const Json& json = *body;
  // The body decides the era; a modern header without the _meta claim is refused there.
  if (json.is_object() && (modern::claims_modern(json) || modern_header)) {
    return post_modern(ep, request, json, responder, accept);
  }
  const bool sse_accepted = accept.sse;
  const bool is_initialize = json.is_object() && json.value("method", Json()) == "initialize";
  std::shared_ptr<Session> session;
  if (is_initialize) {
    auto created = ep->sessions.create(request.client, owner_of(request.principal));
    if (!created.is_ok()) {
      HttpResponse refusal =
          rpc_error(http_status_for(created.status().code()), jsonrpc::readable_id(json),
                    jsonrpc::kInternalError, created.status().message());
      refusal.headers.emplace_back("Retry-After", "5");
      responder.send(std::move(refusal));
      return;
    }
    session = std::move(created).value();
  } else {
    const Json id = jsonrpc::readable_id(json);
    if (auto bad = check_protocol_header(request, id)) return responder.send(std::move(*bad));
    std::optional<HttpResponse> refusal;
    auto found = session_for(*ep, request, id, refusal);
    if (!found.is_ok()) return responder.send(std::move(*refusal));
    session = std::move(found).value();
  }
  if (json.is_array()) return handle_batch(ep, session, json, responder);
  auto message = jsonrpc::classify(json);
  if (!message.is_ok()) {
    if (is_initialize) ep->sessions.remove(session->id());
    responder.send(rpc_error(400, jsonrpc::readable_id(json), jsonrpc::kInvalidRequest,
                             "Invalid Request: " + message.status().message()));
    return;
  }
  if (message->kind != jsonrpc::MessageKind::kRequest) {
    ep->dispatcher.handle(session, *message, nullptr);
    responder.send(accepted());
    return;
  }
  auto channel = std::make_shared<HttpReplyChannel>(responder, sse_accepted, session, is_initialize,
                                                    ep->options.keepalive_interval, ep->streams);
  // A client that accepts only text/event-stream gets one.
  if (!accept.json || ep->dispatcher.prefers_stream(*message)) channel->start_stream();
  ep->dispatcher.handle(session, *message, channel);
  if (is_initialize && !session->protocol_version()) ep->sessions.remove(session->id());
}

void handle_post(const EndpointPtr& ep, HttpRequest request, const Responder& responder) {
  if (const std::string* type = request.header("content-type");
      type != nullptr && media_type(*type) != "application/json") {
    responder.send(rpc_error(415, nullptr, jsonrpc::kInvalidRequest,
                             "Unsupported Media Type: POST a JSON-RPC message as "
                             "application/json, not '" +
                                 *type + "'"));
    return;
  }
  AcceptInfo accept = read_accept(request);
  if (!accept.json && !accept.sse) {
    responder.send(rpc_error(406, nullptr, jsonrpc::kInvalidRequest,
                             "Not Acceptable: the client must accept application/json or "
                             "text/event-stream"));
    return;
  }
  ep->blocking([ep, request = std::move(request), responder, accept] {
    post_blocking(ep, request, responder, accept);
  });
}

// GET with Last-Event-ID: the rest of a POST stream of this session (resumable_streams.h).
void resume_stream(const EndpointPtr& ep, const Session& session, const std::string& last_event_id,
                   http::StreamHead head, const Responder& responder) {
  auto found = ep->streams->find(session.id(), last_event_id);
  if (!found.is_ok()) {
    const int status = found.status().code() == ErrorCode::kNotFound ? 404 : 400;
    responder.send(rpc_error(status, nullptr, jsonrpc::kInvalidRequest,
                             "Last-Event-ID: " + found.status().message()));
    return;
  }
  auto [log, after] = std::move(found).value();
  if (!log->keeps(after)) {
    responder.send(rpc_error(404, nullptr, jsonrpc::kInvalidRequest,
                             "Last-Event-ID: the events after '" + last_event_id +
                                 "' are no longer kept; send the request again"));
    return;
  }
  auto attached = log->resume(responder.start_stream(std::move(head)), after);
  if (!attached.is_ok()) return;  // the stream is open already: it ends empty
  std::weak_ptr<StreamLog> weak = log;
  responder.on_cancel([weak, attachment = *attached](http::CancelReason, const Responder&) {
    if (auto l = weak.lock()) l->forget(attachment);
  });
}

void handle_get(const EndpointPtr& ep, const HttpRequest& request, const Responder& responder) {
  const std::string* accept = request.header("accept");
  if (accept != nullptr && !read_accept(request).sse && accept->find("*/*") == std::string::npos) {
    responder.send(rpc_error(406, nullptr, jsonrpc::kInvalidRequest,
                             "Not Acceptable: GET opens a text/event-stream"));
    return;
  }
  if (auto bad = check_protocol_header(request, nullptr)) return responder.send(std::move(*bad));
  std::optional<HttpResponse> refusal;
  auto found = session_for(*ep, request, nullptr, refusal);
  if (!found.is_ok()) return responder.send(std::move(*refusal));
  std::shared_ptr<Session> session = std::move(found).value();
  http::StreamHead head;
  head.keepalive_interval = ep->options.keepalive_interval;
  if (const std::string* last = request.header("last-event-id"); last != nullptr) {
    return resume_stream(ep, *session, *last, std::move(head), responder);
  }
  auto sink = std::make_shared<StreamSink>(responder.start_stream(std::move(head)));
  if (auto previous = session->set_standalone_sink(sink)) previous->close();
  std::weak_ptr<Session> weak = session;
  responder.on_cancel([weak, raw = sink.get()](http::CancelReason, const Responder&) {
    if (auto s = weak.lock()) s->clear_standalone_sink(raw);
  });
}

void handle_delete(const EndpointPtr& ep, const HttpRequest& request, const Responder& responder) {
  const std::string* id = request.header("mcp-session-id");
  if (id == nullptr || id->empty()) {
    responder.send(rpc_error(400, nullptr, jsonrpc::kSessionRequired,
                             "Bad Request: the Mcp-Session-Id header is required"));
    return;
  }
  const SessionOwner owner = owner_of(request.principal);
  if (!ep->sessions.remove(*id, &owner)) {
    responder.send(rpc_error(404, nullptr, jsonrpc::kSessionNotFound,
                             "Session not found: MCP session '" + *id + "' is unknown or ended"));
    return;
  }
  KF_LOG_DEBUG("mcp session {} ended by the client", *id);
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/plain";
  responder.send(std::move(r));
}

}  // namespace

Status add_mcp_routes(http::Router& router, const Dispatcher& dispatcher,
                      http::BlockingExecutor blocking, HttpTransportOptions options) {
  const std::string path = options.path;
  auto ep = std::make_shared<Endpoint>(dispatcher, std::move(blocking), std::move(options));
  KF_RETURN_IF_ERROR(router.add(
      "POST", path, [ep](HttpRequest r, const Responder& s) { handle_post(ep, std::move(r), s); }));
  KF_RETURN_IF_ERROR(router.add(
      "GET", path, [ep](const HttpRequest& r, const Responder& s) { handle_get(ep, r, s); }));
  KF_RETURN_IF_ERROR(router.add(
      "DELETE", path, [ep](const HttpRequest& r, const Responder& s) { handle_delete(ep, r, s); }));
  return Status::ok();
}

}  // namespace kforge::frontends::mcp
