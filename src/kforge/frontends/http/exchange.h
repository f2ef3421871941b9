// Exchange: the thread-safe mailbox between a handler (any thread) and the connection's
// session (io thread) for one request. Handlers only see it through Responder/EventStream
// (responder.h); the session (http_server.cc) drains it.
//
// It holds no Asio object: the session gives it a `wake` function that posts a wake-up to
// the connection's executor and does nothing once the server is gone, so an Exchange may
// safely outlive the connection and the server (a JobService callback may still hold it).
//
// Thread-safety: every method may be called from any thread. Callbacks registered by the
// handler are always invoked and destroyed without the internal lock held.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/http/responder.h"

namespace kforge::frontends::http {

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  using Clock = std::chrono::steady_clock;

  // `wake` is called (without the lock held) after every change the session must act on.
  // `max_queued_bytes` bounds the stream bytes waiting to be written.
  Exchange(std::string request_id, std::function<void()> wake, size_t max_queued_bytes);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // The first Responder of a new exchange. The session hands it to the handler and keeps
  // no copy, so that dropping every copy is noticed as an abandoned exchange.
  static Responder make_responder(const std::shared_ptr<Exchange>& exchange);

  const std::string& request_id() const { return request_id_; }

  // ---- handler side (through Responder / EventStream / HandlerRef) ----
  void respond(HttpResponse response);
  bool start_stream(StreamHead head);
  bool push_stream_bytes(std::string_view bytes);
  void close_stream();
  bool stream_open() const;
  void add_cancel_callback(Responder::CancelCallback callback);
  void set_deadline(Clock::time_point when, Responder::DeadlineCallback fire);
  bool cancelled() const;
  // Every handler-side handle is gone: answer 500 if nothing was answered, end a stream.
  void abandon();

  // ---- session side (io thread) ----
  struct Answer {
    std::optional<HttpResponse> response;  // a complete response, or
    std::optional<StreamHead> stream;      // the head of a streaming response
  };
  // The handler's answer, once (nullopt while it has not answered).
  std::optional<Answer> take_answer();

  struct StreamUpdate {
    std::string bytes;        // formatted event bytes queued since the last call
    bool closed = false;      // the producer closed (or abandoned) the stream
    bool overflowed = false;  // the producer outran the client past the byte limit
  };
  StreamUpdate take_stream_update();

  // The armed deadline, if any, while no answer has been taken.
  std::optional<Clock::time_point> deadline() const;
  // Runs the deadline callback if the deadline has passed and nothing was answered.
  void fire_deadline_if_due(Clock::time_point now);

  // Marks the exchange cancelled and runs the cancel callbacks (once; later calls no-op).
  void cancel(CancelReason reason);
  // The session is done with this exchange: later handler calls are ignored and every
  // callback is dropped (breaking any reference cycle through them).
  void finish();

 private:
  enum class Phase { kPending, kAnswered, kStreaming, kFinished };

  Responder responder_for_callback() const;

  const std::string request_id_;
  const std::function<void()> wake_;
  const size_t max_queued_bytes_;
  std::weak_ptr<HandlerRef> handler_ref_;  // set once by make_responder

  mutable Mutex mu_;
  Phase phase_ GUARDED_BY(mu_) = Phase::kPending;
  std::optional<Answer> answer_ GUARDED_BY(mu_);  // taken by the session
  std::optional<CancelReason> cancelled_ GUARDED_BY(mu_);
  std::vector<Responder::CancelCallback> cancel_callbacks_ GUARDED_BY(mu_);
  std::optional<Clock::time_point> deadline_ GUARDED_BY(mu_);
  Responder::DeadlineCallback deadline_callback_ GUARDED_BY(mu_);
  std::string queued_bytes_ GUARDED_BY(mu_);
  bool stream_closed_ GUARDED_BY(mu_) = false;
  bool overflowed_ GUARDED_BY(mu_) = false;
};

}  // namespace kforge::frontends::http
