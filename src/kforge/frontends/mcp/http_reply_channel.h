// Internal to the Streamable HTTP transport: the ReplyChannel of one POSTed request, and the
// MessageSink of a session's GET stream.
//
// HttpReplyChannel answers with application/json unless the request needs a stream: it
// switches to text/event-stream when started eagerly (start_stream) or when a related
// message (progress, logging, a sampling request) must go out before the response — if the
// client accepts SSE. Without SSE, related messages go to the session's GET stream, or are
// dropped when there is none. A cancelled request ends its stream, or gets 202 when nothing
// was sent yet.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <memory>
#include <optional>

#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/http/responder.h"
#include "kforge/frontends/mcp/protocol/request_context.h"
#include "kforge/frontends/mcp/protocol/session.h"
#include "kforge/frontends/mcp/resumable_streams.h"

namespace kforge::frontends::mcp {

class HttpReplyChannel : public ReplyChannel {
 public:
  // `announce_session`: add Mcp-Session-Id to the response once the session is initialized
  // (the answer to `initialize`).
  // `streams`: where a 2025 session's event stream is kept for resumption (resumable_streams.h);
  // null for a 2026-07-28 request, whose streams are not resumable and whose JSON error
  // answers carry the HTTP status of their code (modern::http_status_for_error).
  HttpReplyChannel(http::Responder responder, bool sse_accepted, std::shared_ptr<Session> session,
                   bool announce_session, std::chrono::milliseconds keepalive_interval,
                   std::shared_ptr<ResumableStreams> streams);

  // Starts the event stream now (a long request), if the client accepts SSE.
  void start_stream();

  void send_related(const Json& message) override;
  void send_response(const Json& response) override;
  void abandon() override;
  bool close_for_polling() override;

 private:
  bool ensure_stream_locked() REQUIRES(mu_);
  http::HeaderList session_headers() const;

  const http::Responder responder_;
  const bool sse_accepted_;
  const std::shared_ptr<Session> session_;
  const bool announce_session_;
  const std::chrono::milliseconds keepalive_interval_;
  const std::shared_ptr<ResumableStreams> streams_;
  Mutex mu_;
  std::optional<http::EventStream> stream_ GUARDED_BY(mu_);  // a stream not kept
  std::shared_ptr<StreamLog> log_ GUARDED_BY(mu_);           // a stream kept for resumption
  bool done_ GUARDED_BY(mu_) = false;
};

// A session's GET stream as its standalone MessageSink.
class StreamSink : public MessageSink {
 public:
  explicit StreamSink(http::EventStream stream) : stream_(std::move(stream)) {}
  bool send(const Json& message) override;
  void close() override { stream_.close(); }

 private:
  const http::EventStream stream_;
};

// The SSE event that carries one JSON-RPC message.
http::SseEvent sse_message(const Json& message);

}  // namespace kforge::frontends::mcp
