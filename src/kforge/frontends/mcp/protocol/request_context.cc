#include "kforge/frontends/mcp/protocol/request_context.h"

#include "kforge/frontends/mcp/protocol/jsonrpc.h"

namespace kforge::frontends::mcp {

Json progress_token_of(const Json& params) {
  const Json* meta = jsonrpc::param(params, "_meta");
  if (meta == nullptr || !meta->is_object()) return nullptr;
  auto token = meta->find("progressToken");
  if (token == meta->end() || !(token->is_string() || token->is_number_integer())) return nullptr;
  return *token;
}

RequestContext::RequestContext(std::shared_ptr<Session> session, Json id, std::string method,
                               Json progress_token, std::shared_ptr<ReplyChannel> channel)
    : session_(std::move(session)),
      id_(std::move(id)),
      method_(std::move(method)),
      progress_token_(std::move(progress_token)),
      channel_(std::move(channel)) {}

RequestContext::~RequestContext() = default;

void RequestContext::mark_registered() {
  MutexLock lock(mu_);
  registered_ = true;
}

bool RequestContext::finish_locked(std::vector<Json>& awaited) {
  if (finished_) return false;
  finished_ = true;
  awaited.swap(awaited_client_ids_);
  return true;
}

void RequestContext::after_finish(const std::vector<Json>& awaited, const Status& why) {
  for (const Json& id : awaited)
    session_->abandon_client_request(id, why);
  bool registered = false;
  {
    MutexLock lock(mu_);
    registered = registered_;
  }
  if (registered) session_->end_request(id_);
}

void RequestContext::respond(Json result) {
  std::vector<Json> awaited;
  {
    MutexLock lock(mu_);
    if (!finish_locked(awaited)) return;
    cancel_hooks_.clear();
    channel_->send_response(jsonrpc::make_result(id_, std::move(result)));
  }
  after_finish(awaited, unavailable("the request was answered before the client replied"));
}

void RequestContext::respond_error(int code, std::string message, std::optional<Json> data) {
  std::vector<Json> awaited;
  {
    MutexLock lock(mu_);
    if (!finish_locked(awaited)) return;
    cancel_hooks_.clear();
    channel_->send_response(jsonrpc::make_error(id_, code, std::move(message), std::move(data)));
  }
  after_finish(awaited, unavailable("the request failed before the client replied"));
}

void RequestContext::respond_status(const Status& status) {
  std::optional<Json> data;
  if (!status.field_path().empty()) data = Json{{"field", status.field_path()}};
  const Json error = jsonrpc::make_error_from(id_, status)["error"];
  respond_error(error["code"].get<int>(), error["message"].get<std::string>(), std::move(data));
}

bool RequestContext::finished() const {
  MutexLock lock(mu_);
  return finished_;
}

void RequestContext::report_progress(double progress, std::optional<double> total,
                                     std::string message, Json meta) {
  if (progress_token_.is_null()) return;
  Json params = {{"progressToken", progress_token_}, {"progress", progress}};
  if (total) params["total"] = *total;
  if (!message.empty()) params["message"] = std::move(message);
  if (!meta.is_null()) params["_meta"] = std::move(meta);
  MutexLock lock(mu_);
  if (finished_ || (last_progress_ && progress <= *last_progress_)) return;
  last_progress_ = progress;
  channel_->send_related(jsonrpc::make_notification("notifications/progress", std::move(params)));
}

void RequestContext::log(LogLevel level, std::string logger, Json data) {
  if (!session_->log_enabled(level)) return;
  Json params = {{"level", to_string(level)}, {"data", std::move(data)}};
  if (!logger.empty()) params["logger"] = std::move(logger);
  MutexLock lock(mu_);
  if (finished_) return;
  channel_->send_related(jsonrpc::make_notification("notifications/message", std::move(params)));
}

void RequestContext::request_client(std::string method, Json params,
                                    Session::ClientResponseCallback done) {
  if (session_->is_stateless()) {
    done(Status(ErrorCode::kFailedPrecondition,
                "the server cannot send '" + method +
                    "' to the client: revision 2026-07-28 has no server-to-client requests "
                    "(the tool must answer input_required instead)"));
    return;
  }
  Json id = session_->expect_client_response(std::move(done));
  bool sent = false;
  {
    MutexLock lock(mu_);
    if (!finished_) {
      awaited_client_ids_.push_back(id);
      channel_->send_related(jsonrpc::make_request(id, std::move(method), std::move(params)));
      sent = true;
    }
  }
  if (!sent) session_->abandon_client_request(id, unavailable("the request already finished"));
}

bool RequestContext::close_stream_for_polling() {
  MutexLock lock(mu_);
  return !finished_ && channel_->close_for_polling();
}

void RequestContext::on_cancel(std::function<void()> hook) {
  {
    MutexLock lock(mu_);
    if (!cancelled_) {
      if (!finished_) cancel_hooks_.push_back(std::move(hook));
      return;
    }
  }
  hook();
}

void RequestContext::cancel() {
  std::vector<Json> awaited;
  std::vector<std::function<void()>> hooks;
  {
    MutexLock lock(mu_);
    if (!finish_locked(awaited)) return;
    cancelled_ = true;
    hooks.swap(cancel_hooks_);
    channel_->abandon();
  }
  for (auto& hook : hooks)
    hook();
  after_finish(awaited, Status(ErrorCode::kCancelled, "the request was cancelled"));
}

bool RequestContext::cancelled() const {
  MutexLock lock(mu_);
  return cancelled_;
}

}  // namespace kforge::frontends::mcp
