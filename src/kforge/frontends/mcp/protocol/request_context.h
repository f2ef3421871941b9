// RequestContext: one client request while the server works on it. Handlers answer through
// it, report progress, log, ask the client (sampling, elicitation) and learn about
// cancellation; the transport supplies a ReplyChannel that decides where those messages go
// (the request's SSE stream or JSON body over HTTP, stdout over stdio).
//
// Contract: exactly one response per request, unless it was cancelled (then none: the
// channel is abandoned). Progress notifications are sent only when the request carried a
// progressToken, with strictly increasing `progress`, and never after the response.
//
// Thread-safety: every method is thread-safe; hooks and callbacks run without the lock held.
//
// Example (a handler finishing later, from a JobService callback):
//   ctx->on_cancel([&service, job_id] { service.cancel(job_id, "cancelled").ignore(); });
//   ctx->report_progress(0, 100, "queued");
//   ... ctx->respond(Json{{"content", ...}});
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/mcp/protocol/session.h"

namespace kforge::frontends::mcp {

// Transport side of one request. Called at most once with send_response or abandon, after
// any number of send_related calls.
class ReplyChannel {
 public:
  virtual ~ReplyChannel() = default;
  // A notification or a server->client request that belongs to the request.
  virtual void send_related(const Json& message) = 0;
  // The JSON-RPC response (result or error).
  virtual void send_response(const Json& response) = 0;
  // The request was cancelled: end without a response.
  virtual void abandon() = 0;
  // Ends the request's event stream now while the request goes on: the client resumes it
  // (GET with Last-Event-ID, 2025-11-25 sessions) and receives the rest there. False when the
  // transport has no resumable stream for the request.
  virtual bool close_for_polling() { return false; }
};

class RequestContext : public InFlightRequest, public std::enable_shared_from_this<RequestContext> {
 public:
  // `progress_token` is params._meta.progressToken (null when absent or not a string/integer).
  RequestContext(std::shared_ptr<Session> session, Json id, std::string method, Json progress_token,
                 std::shared_ptr<ReplyChannel> channel);
  ~RequestContext() override;
  RequestContext(const RequestContext&) = delete;
  RequestContext& operator=(const RequestContext&) = delete;

  const Json& id() const { return id_; }
  const std::string& method() const override { return method_; }
  // The request's params (null when absent): handlers of revision 2026-07-28 read
  // inputResponses and requestState there (input_required.h).
  const Json& params() const { return params_; }
  // Set by the dispatcher before the handler runs.
  void set_params(Json params) { params_ = std::move(params); }
  Session& session() const { return *session_; }
  // The negotiated protocol version of the session.
  std::string protocol_version() const { return session_->effective_version(); }

  // Called by the dispatcher once the request is registered in the session, so that the
  // response (or cancel) unregisters it.
  void mark_registered();

  // ---- answering (the first of respond / respond_error / cancel wins) ----
  void respond(Json result);
  void respond_error(int code, std::string message, std::optional<Json> data = {});
  void respond_status(const Status& status);
  bool finished() const;

  // ---- progress, logging, client requests ----
  bool has_progress_token() const { return !progress_token_.is_null(); }
  // notifications/progress {progressToken, progress, total?, message?, _meta?}; skipped without
  // a token, after the response, or when `progress` does not exceed the last one sent.
  void report_progress(double progress, std::optional<double> total, std::string message,
                       Json meta = nullptr);
  // notifications/message when the session's level lets `level` through.
  void log(LogLevel level, std::string logger, Json data);
  // Sends `method` to the client on this request's channel; `done` gets its result or an error
  // (client error, request finished or cancelled first, session ended).
  void request_client(std::string method, Json params, Session::ClientResponseCallback done);

  // Closes the request's stream for the client to resume (ReplyChannel::close_for_polling).
  bool close_stream_for_polling();

  // ---- cancellation (notifications/cancelled) ----
  // `hook` runs once when the request is cancelled (now, if it already is). Not run when the
  // request finishes normally.
  void on_cancel(std::function<void()> hook);
  // Marks the request cancelled, abandons the channel and runs the hooks. No-op once finished.
  void cancel() override;
  bool cancelled() const;

 private:
  // Marks finished; returns false if it already was. Collects the client requests to fail.
  bool finish_locked(std::vector<Json>& awaited) REQUIRES(mu_);
  void after_finish(const std::vector<Json>& awaited, const Status& why);

  const std::shared_ptr<Session> session_;
  const Json id_;
  const std::string method_;
  const Json progress_token_;
  const std::shared_ptr<ReplyChannel> channel_;
  Json params_;  // written once before the handler runs, then only read

  mutable Mutex mu_;
  bool registered_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;
  bool cancelled_ GUARDED_BY(mu_) = false;
  std::optional<double> last_progress_ GUARDED_BY(mu_);
  std::vector<std::function<void()>> cancel_hooks_ GUARDED_BY(mu_);
  std::vector<Json> awaited_client_ids_ GUARDED_BY(mu_);
};

// params._meta.progressToken when it is a string or an integer; null otherwise.
Json progress_token_of(const Json& params);

}  // namespace kforge::frontends::mcp
