#include "kforge/frontends/mcp/http_reply_channel.h"

namespace kforge::frontends::mcp {

http::SseEvent sse_message(const Json& message) {
  return http::SseEvent::of(http::dump_json(message), "message");
}

bool StreamSink::send(const Json& message) {
  return stream_.send_event(sse_message(message));
}

HttpReplyChannel::HttpReplyChannel(http::Responder responder, bool sse_accepted,
                                   std::shared_ptr<Session> session, bool announce_session,
                                   std::chrono::milliseconds keepalive_interval)
    : responder_(std::move(responder)),
      sse_accepted_(sse_accepted),
      session_(std::move(session)),
      announce_session_(announce_session),
      keepalive_interval_(keepalive_interval) {}

http::HeaderList HttpReplyChannel::session_headers() const {
  http::HeaderList headers;
  if (announce_session_ && session_->protocol_version()) {
    headers.emplace_back("Mcp-Session-Id", session_->id());
  }
  return headers;
}

bool HttpReplyChannel::ensure_stream_locked() {
  if (stream_) return true;
  if (!sse_accepted_ || done_) return false;
  http::StreamHead head;
  head.headers = session_headers();
  head.keepalive_interval = keepalive_interval_;
  stream_ = responder_.start_stream(std::move(head));
  return true;
}

void HttpReplyChannel::start_stream() {
  std::lock_guard lock(mu_);
  ensure_stream_locked();
}

void HttpReplyChannel::send_related(const Json& message) {
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    if (ensure_stream_locked()) {
      stream_->send_event(sse_message(message));
      return;
    }
  }
  // No stream for this request: the session's GET stream may carry it.
  session_->send_standalone(message);
}

void HttpReplyChannel::send_response(const Json& response) {
  std::lock_guard lock(mu_);
  if (done_) return;
  done_ = true;
  if (stream_) {
    stream_->send_event(sse_message(response));
    stream_->close();
    return;
  }
  http::HttpResponse r = http::HttpResponse::json(200, response);
  r.headers = session_headers();
  responder_.send(std::move(r));
}

void HttpReplyChannel::abandon() {
  std::lock_guard lock(mu_);
  if (done_) return;
  done_ = true;
  if (stream_) {
    stream_->close();
    return;
  }
  http::HttpResponse r;
  r.status = 202;
  r.content_type = "text/plain";
  responder_.send(std::move(r));
}

}  // namespace kforge::frontends::mcp
