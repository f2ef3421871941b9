// How a handler answers: asynchronously, from any thread, without blocking an io thread.
//
// A handler is called on an io thread with the request and a `Responder`. It must return
// quickly: blocking work (store, big JSON parses) goes to the blocking pool, waiting for a
// job goes through a JobService callback. Whenever it is ready, from whatever thread, it
// calls exactly one of
//   - `send(HttpResponse)`            a complete response, or
//   - `start_stream(StreamHead)`      a streaming response (SSE): it returns an EventStream
//                                     whose `send_event` / `close` may be called from any
//                                     thread; the server writes events in call order and a
//                                     keep-alive comment whenever the stream is idle.
// Later calls are ignored. If every copy of the Responder (and of its EventStream) is dropped
// without a response, the client gets a 500 (or, for a stream, the stream is ended), so a
// request can never hang on a forgotten responder.
//
// Cancellation: when the client disconnects or the server starts shutting down, the
// callbacks registered with `on_cancel` run once, on an io thread, with the reason. On
// kServerStopping a handler may still answer (the server drains in-flight requests for a
// bounded time); on kClientGone any answer is discarded. Callbacks must not block and must
// not capture the Responder (the server keeps them until the exchange ends; they receive a
// Responder instead).
//
// Deadlines: `on_deadline(after, fire)` runs `fire` on an io thread once `after` has passed
// without a response; the waiting REST handlers use it to bound how long a client waits.
// Neither kind of callback keeps the exchange answerable: hold a Responder (or EventStream)
// for as long as you mean to answer.
//
// Example (a handler that answers from the blocking pool):
//   void get_stats(HttpRequest request, Responder responder) {
//     pool([responder, &service] { responder.send(HttpResponse::json(200, service.stats())); });
//   }
//
// Example (a Server-Sent Events stream fed by job progress, e.g. for MCP):
//   EventStream stream = responder.start_stream(StreamHead{});
//   auto sub = service.on_progress(id, [stream](const jobs::JobProgress& p) {
//     stream.send_event(SseEvent::of(progress_json(p).dump(), "message"));
//   });
//   responder.on_cancel([&service, sub](CancelReason, const Responder&) {
//     service.unsubscribe(*sub);
//   });
//   ... later, from any thread: stream.send_event(final_result); stream.close();
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kforge/frontends/http/http_message.h"

namespace kforge::frontends::http {

class Exchange;
class Responder;

enum class CancelReason {
  kClientGone,      // the connection closed or failed; nobody will read an answer
  kServerStopping,  // the server is draining; an answer is still written if it comes soon
};

std::string_view to_string(CancelReason reason);

// One Server-Sent Event. `data` may span lines (each becomes a `data:` line).
struct SseEvent {
  std::string data;
  std::string event;            // `event:` field; omitted when empty
  std::string id;               // `id:` field; omitted when empty
  std::optional<int> retry_ms;  // `retry:` field

  // Shorthand (designated initializers that skip members warn under -Wextra).
  static SseEvent of(std::string data, std::string event = {}, std::string id = {}) {
    SseEvent e;
    e.data = std::move(data);
    e.event = std::move(event);
    e.id = std::move(id);
    return e;
  }
};

// The wire text of an event, ending with the blank line that dispatches it.
std::string format_sse_event(const SseEvent& event);

// Status line and headers of a streaming response. The body is sent with chunked transfer
// encoding; `Cache-Control: no-cache` and `X-Accel-Buffering: no` are added.
struct StreamHead {
  int status = 200;
  std::string content_type = "text/event-stream";
  HeaderList headers;
  // A `: keep-alive` comment is written after this long without an event.
  std::chrono::milliseconds keepalive_interval{15000};
};

// Keeps an exchange answerable; shared by every copy of a Responder and its EventStream.
// When the last one goes, the exchange is abandoned (500 or end of stream).
class HandlerRef {
 public:
  explicit HandlerRef(std::shared_ptr<Exchange> exchange) : exchange_(std::move(exchange)) {}
  ~HandlerRef();
  HandlerRef(const HandlerRef&) = delete;
  HandlerRef& operator=(const HandlerRef&) = delete;
  Exchange& exchange() const { return *exchange_; }

 private:
  std::shared_ptr<Exchange> exchange_;
};

// The producer side of a streaming response. Copyable; thread-safe.
class EventStream {
 public:
  EventStream() = default;
  // Queues one event. Returns false (and drops it) once the stream is closed, the client is
  // gone, the server is stopping, or the client reads so slowly that the queue is over its
  // byte limit (the connection is then closed).
  bool send_event(const SseEvent& event) const;
  // Queues already formatted bytes (e.g. a comment line `: note\n\n`); same contract.
  bool send_raw(std::string_view bytes) const;
  // Ends the stream after the queued events are written. Idempotent.
  void close() const;
  // False once closed, cancelled or abandoned.
  bool is_open() const;

 private:
  friend class Responder;
  explicit EventStream(std::shared_ptr<HandlerRef> ref) : ref_(std::move(ref)) {}
  std::shared_ptr<HandlerRef> ref_;
};

// The handler side of one request/response exchange. Copyable; thread-safe.
class Responder {
 public:
  using CancelCallback = std::function<void(CancelReason, const Responder&)>;
  using DeadlineCallback = std::function<void(const Responder&)>;

  Responder() = default;
  explicit Responder(std::shared_ptr<HandlerRef> ref) : ref_(std::move(ref)) {}

  // Answers the request; only the first answer counts.
  void send(HttpResponse response) const;
  // Starts a streaming response; returns an EventStream that is already closed if the
  // exchange was answered or cancelled before.
  EventStream start_stream(StreamHead head) const;
  // Registers a cancellation callback; if the exchange is already cancelled it runs now,
  // on the calling thread.
  void on_cancel(CancelCallback callback) const;
  // Arms (or re-arms) the deadline: `fire` runs on an io thread after `after` unless the
  // exchange was answered first.
  void on_deadline(std::chrono::milliseconds after, DeadlineCallback fire) const;
  // True once the exchange was cancelled (for either reason).
  bool cancelled() const;
  // The request id (X-Request-Id) of the exchange.
  const std::string& request_id() const;

  // A null Responder (default-constructed) ignores everything.
  explicit operator bool() const { return ref_ != nullptr; }

 private:
  std::shared_ptr<HandlerRef> ref_;
};

}  // namespace kforge::frontends::http
