#include "kforge/frontends/mcp/http_reply_channel.h"

#include "kforge/frontends/mcp/protocol/modern.h"

namespace kforge::frontends::mcp {

http::SseEvent sse_message(const Json& message) {
  return http::SseEvent::of(http::dump_json(message), "message");
}

bool StreamSink::send(const Json& message) {
  return stream_.send_event(sse_message(message));
}

HttpReplyChannel::HttpReplyChannel(http::Responder responder, bool sse_accepted,
                                   std::shared_ptr<Session> session, bool announce_session,
                                   std::chrono::milliseconds keepalive_interval,
                                   std::shared_ptr<ResumableStreams> streams)
    : responder_(std::move(responder)),
      sse_accepted_(sse_accepted),
      session_(std::move(session)),
      announce_session_(announce_session),
      keepalive_interval_(keepalive_interval),
      streams_(std::move(streams)) {}

http::HeaderList HttpReplyChannel::session_headers() const {
  http::HeaderList headers;
  if (announce_session_ && session_->protocol_version()) {
    headers.emplace_back("Mcp-Session-Id", session_->id());
  }
  return headers;
}

bool HttpReplyChannel::ensure_stream_locked() {
  if (stream_ || log_) return true;
  if (!sse_accepted_ || done_) return false;
  http::StreamHead head;
  head.headers = session_headers();
  head.keepalive_interval = keepalive_interval_;
  http::EventStream stream = responder_.start_stream(std::move(head));
  if (streams_ && !session_->id().empty()) {
    log_ = streams_->open(session_->id());
    log_->start(std::move(stream));
  } else {
    stream_ = std::move(stream);
  }
  return true;
}

void HttpReplyChannel::start_stream() {
  MutexLock lock(mu_);
  ensure_stream_locked();
}

void HttpReplyChannel::send_related(const Json& message) {
  {
    MutexLock lock(mu_);
    if (done_) return;
    if (ensure_stream_locked()) {
      if (log_) {
        log_->send(message);
      } else {
        stream_->send_event(sse_message(message));
      }
      return;
    }
  }
  // No stream for this request: the session's GET stream may carry it.
  session_->send_standalone(message);
}

void HttpReplyChannel::send_response(const Json& response) {
  MutexLock lock(mu_);
  if (done_) return;
  done_ = true;
  if (log_) return log_->finish(response);
  if (stream_) {
    stream_->send_event(sse_message(response));
    stream_->close();
    return;
  }
  int status = 200;
  if (auto error = response.find("error"); !streams_ && error != response.end()) {
    status = modern::http_status_for_error(error->value("code", 0));
  }
  http::HttpResponse r = http::HttpResponse::json(status, response);
  r.headers = session_headers();
  responder_.send(std::move(r));
}

void HttpReplyChannel::abandon() {
  MutexLock lock(mu_);
  if (done_) return;
  done_ = true;
  if (log_) return log_->abandon();
  if (stream_) {
    stream_->close();
    return;
  }
  http::HttpResponse r;
  r.status = 202;
  r.content_type = "text/plain";
  responder_.send(std::move(r));
}

bool HttpReplyChannel::close_for_polling() {
  MutexLock lock(mu_);
  return !done_ && log_ && log_->detach();
}

}  // namespace kforge::frontends::mcp
