// One HTTP/1.1 connection (Boost.Beast + C++20 coroutines). With http_reader.cc (the parser
// set-up and the checks on a head, without sockets) the only translation units that include
// Beast: this one costs ~30 s and ~1 GB to compile.
//
// A Session loops: wait (idle timeout) for the first byte of a request, then read its head
// (header timeout, counted from that byte); refuse it early (framing, access checks,
// Content-Length over the limit) or answer `Expect: 100-continue`; read the body (body
// timeout; limit enforced for chunked bodies too); run the route's handler with a Responder
// over a fresh Exchange; wait, without blocking, for the answer while watching the socket for
// a disconnect and firing deadlines; then write the response, or a chunked event stream with
// keep-alive comments. It reports its phase to the server for the connection cap.
//
// Wake-ups: a handler answering from any thread updates the Exchange and calls its `wake`
// function, which posts Session::wake() to this connection's strand through the server's
// Gate (server_core.h), so late answers after the server is gone are dropped safely.
#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "kforge/common/log.h"
#include "kforge/common/random.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/http/exchange.h"
#include "kforge/frontends/http/http_reader.h"
#include "kforge/frontends/http/server_core.h"

namespace kforge::frontends::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using namespace net::experimental::awaitable_operators;

namespace {

constexpr auto kTuple = net::as_tuple(net::use_awaitable);
// Bytes of a pipelined next request buffered while a handler works; past this the socket is
// not read (and a disconnect is noticed only by the next write).
constexpr size_t kMaxPipelinedBytes = size_t{64} * 1024;
constexpr auto kLingerTime = std::chrono::milliseconds(500);

bool is_disconnect(const beast::error_code& ec) {
  return ec == net::error::eof || ec == bhttp::error::end_of_stream ||
         ec == bhttp::error::partial_message || ec == net::error::connection_reset ||
         ec == net::error::connection_aborted || ec == net::error::broken_pipe ||
         ec == net::error::operation_aborted || ec == net::error::bad_descriptor ||
         ec == net::error::not_connected || ec == beast::error::timeout;
}

// What the log line and the response headers need after the request was handed over.
struct RequestMeta {
  std::string method;
  std::string path;
  std::string request_id;
  unsigned version = 11;
  HeaderList cors;
  std::chrono::steady_clock::time_point started;
};

void log_request(const RequestMeta& meta, int status, std::string_view note = {}) {
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - meta.started)
          .count();
  if (status >= 500) {
    KF_LOG_WARN("http {} {} -> {} in {:.1f} ms request_id={}{}", meta.method, meta.path, status, ms,
                meta.request_id, note);
  } else {
    KF_LOG_DEBUG("http {} {} -> {} in {:.1f} ms request_id={}{}", meta.method, meta.path, status,
                 ms, meta.request_id, note);
  }
}

class Session final : public Connection, public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerCore& server, uint64_t id)
      : server_(server),
        id_(id),
        peer_(peer_address(socket)),
        stream_(std::move(socket)),
        signal_(stream_.get_executor()),
        park_(stream_.get_executor()) {}

  ~Session() override { server_.unregister_connection(id_); }

  net::any_io_executor executor() override { return stream_.get_executor(); }
  void start() override { net::co_spawn(executor(), main(shared_from_this()), net::detached); }
  // The rest run on the session's strand.
  void on_server_stop() override;
  void force_close() override;
  void wake() {
    wake_pending_ = true;
    signal_.cancel();
  }

 private:
  enum class State { kIdle, kReading, kHandling, kWriting, kStreaming };

  static net::awaitable<void> main(std::shared_ptr<Session> self) { co_await self->run(); }
  net::awaitable<void> run();
  static std::string peer_address(const tcp::socket& socket) {
    beast::error_code ec;
    auto endpoint = socket.remote_endpoint(ec);
    return ec ? std::string("unknown") : endpoint.address().to_string();
  }

  net::awaitable<bool> serve_one();
  net::awaitable<bool> await_first_byte();
  net::awaitable<bool> read_body(RequestParser& parser, const RequestMeta& meta);
  net::awaitable<bool> dispatch(HttpRequest request, RequestMeta& meta, bool keep_alive);
  net::awaitable<std::optional<Exchange::Answer>> wait_for_answer();
  net::awaitable<bool> serve_stream(RequestMeta& meta, StreamHead head, bool keep_alive);
  net::awaitable<bool> write_response(const RequestMeta& meta, HttpResponse response,
                                      bool keep_alive);
  net::awaitable<bool> write_bytes(std::string_view bytes, bool chunked);
  net::awaitable<bool> wait_signal();
  net::awaitable<void> watch_peer();
  net::awaitable<void> close_connection();
  std::function<void()> make_wake();
  void end_exchange();

  void set_phase(ConnectionPhase phase) { server_.set_phase(id_, phase); }

  ServerCore& server_;
  const uint64_t id_;
  const std::string peer_;  // the client's address, for its identity
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  net::steady_timer signal_;  // woken by wake(); also the deadline and keep-alive timer
  net::steady_timer park_;    // parks watch_peer() when the pipelining buffer is full
  std::shared_ptr<Exchange> exchange_;
  State state_ = State::kIdle;
  bool wake_pending_ = false;
  bool stopping_ = false;
  // The client half-closed (EOF) after its request: it still gets its answer, then the
  // connection closes.
  bool peer_done_sending_ = false;
};

net::awaitable<void> Session::run() {
  try {
    while (!stopping_) {
      if (!co_await serve_one()) break;
    }
  } catch (const std::exception& e) {
    KF_LOG_ERROR("http session failed: {}", e.what());
  }
  end_exchange();
  co_await close_connection();
}

void Session::end_exchange() {
  if (exchange_ != nullptr) {
    exchange_->finish();
    exchange_.reset();
  }
}

std::function<void()> Session::make_wake() {
  return [gate = server_.gate(), weak = weak_from_this()] {
    MutexLock lock(gate->mu);
    if (!gate->open) return;
    if (auto self = weak.lock()) {
      net::post(self->executor(), [weak] {
        if (auto s = weak.lock()) s->wake();
      });
    }
  };
}

void Session::on_server_stop() {
  stopping_ = true;
  switch (state_) {
    case State::kIdle:
      stream_.cancel();
      break;
    case State::kHandling:
    case State::kStreaming:
      if (exchange_ != nullptr) exchange_->cancel(CancelReason::kServerStopping);
      wake();
      break;
    case State::kReading:
    case State::kWriting:
      break;  // finishes, then closes (stopping_)
  }
}

void Session::force_close() {
  stopping_ = true;
  if (exchange_ != nullptr) exchange_->cancel(CancelReason::kServerStopping);
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
  wake();
}

// Plain (non-coroutine) helpers keep temporaries out of coroutine bodies: GCC 12 has bugs
// with class-type temporaries in conditional expressions inside coroutines.

RequestMeta meta_for(const HttpRequest& request, unsigned version, const AccessPolicy& policy,
                     std::chrono::steady_clock::time_point started) {
  RequestMeta meta;
  meta.method = request.method;
  meta.path = request.path;
  meta.request_id = request.request_id;
  meta.version = version;
  meta.cors = policy.cors_headers(request);
  meta.started = started;
  return meta;
}

// Framing, access checks and the Content-Length limit, on the head alone.
std::optional<HttpResponse> refusal_for(const HttpRequest& request, const RequestParser& parser,
                                        const ServerCore& server, const ReaderLimits& limits) {
  if (auto refusal = check_framing(parser)) return refusal;
  std::string allow;
  if (request.method == "OPTIONS") allow = server.router().allowed_methods(request.path);
  if (auto refusal = server.policy().check(request, allow)) return refusal;
  return check_content_length(parser, limits);
}

ReaderLimits reader_limits(const HttpServer::Options& options) {
  return ReaderLimits{options.max_header_bytes, options.max_body_bytes};
}

// Runs the handler. The caller passes a temporary Responder, so the session holds none.
void run_handler(const Router& router, HttpRequest request, const Responder& responder) {
  try {
    router.dispatch(std::move(request), responder);
  } catch (const std::exception& e) {
    responder.send(HttpResponse::error(internal_error(std::string("dispatch: ") + e.what())));
  }
}

// Waits, up to the idle timeout, until the first byte of the next request is buffered.
// False when the connection ends instead.
net::awaitable<bool> Session::await_first_byte() {
  set_phase(ConnectionPhase::kAwaitingRequest);
  if (buffer_.size() > 0) co_return true;  // pipelined
  stream_.expires_after(server_.options().idle_timeout);
  auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(4096), kTuple);
  buffer_.commit(n);
  co_return !ec && n > 0;
}

net::awaitable<bool> Session::serve_one() {
  const auto& options = server_.options();
  const ReaderLimits limits = reader_limits(options);
  state_ = State::kIdle;
  if (!co_await await_first_byte()) co_return false;
  set_phase(ConnectionPhase::kReceivingHead);
  RequestParser parser;
  configure_for_head(parser, limits);
  // The whole head must arrive within the header timeout of its first byte.
  stream_.expires_after(options.header_timeout);
  auto [ec, n] = co_await bhttp::async_read_header(stream_, buffer_, parser, kTuple);
  const auto started = std::chrono::steady_clock::now();
  if (ec) {
    if (is_disconnect(ec)) co_return false;
    RequestMeta meta;
    meta.method = "-";
    meta.path = "-";
    meta.request_id = random_hex(8);
    meta.started = started;
    HttpResponse response = malformed_request_response(ec);
    co_await write_response(meta, std::move(response), false);
    co_return false;
  }
  state_ = State::kReading;
  set_phase(ConnectionPhase::kBusy);
  HttpRequest request = request_from_head(parser);
  AccessPolicy::Identity identity = server_.policy().identify(request, peer_);
  request.client = std::move(identity.client);
  request.principal = std::move(identity.principal);
  RequestMeta meta = meta_for(request, parser.get().version(), server_.policy(), started);
  const bool keep_alive = parser.get().keep_alive();
  std::optional<HttpResponse> refusal = refusal_for(request, parser, server_, limits);
  if (refusal) {
    // The body of a refused request is never read (nor asked for with 100 Continue), so the
    // connection can be kept only if there is none.
    const bool keep = keep_alive && parser.is_done();
    co_return co_await write_response(meta, std::move(*refusal), keep);
  }
  const bool body_ok = co_await read_body(parser, meta);
  if (!body_ok) co_return false;
  request.body = std::move(parser.get().body());
  auto params = parse_query(split_target(request.target).second);
  if (!params.is_ok()) {
    HttpResponse response = HttpResponse::error(params.status());
    co_return co_await write_response(meta, std::move(response), keep_alive);
  }
  request.query = std::move(params).value();
  co_return co_await dispatch(std::move(request), meta, keep_alive);
}

// Reads the body (answering `Expect: 100-continue` first). False when the connection must
// end (the refusal, if any, has been written).
net::awaitable<bool> Session::read_body(RequestParser& parser, const RequestMeta& meta) {
  if (parser.is_done()) co_return true;
  const auto& options = server_.options();
  limit_body(parser, reader_limits(options));
  auto expect = parser.get()[bhttp::field::expect];
  if (meta.version >= 11 && beast::iequals(expect, "100-continue")) {
    bhttp::response<bhttp::empty_body> go_on{bhttp::status::continue_, meta.version};
    stream_.expires_after(options.write_timeout);
    auto [ec, n] = co_await bhttp::async_write(stream_, go_on, kTuple);
    if (ec) co_return false;
  }
  stream_.expires_after(options.body_timeout);
  auto [ec, n] = co_await bhttp::async_read(stream_, buffer_, parser, kTuple);
  if (!ec) co_return true;
  if (!is_disconnect(ec)) {
    HttpResponse response = body_error_response(ec, options.max_body_bytes);
    co_await write_response(meta, std::move(response), false);
  }
  co_return false;
}

net::awaitable<bool> Session::dispatch(HttpRequest request, RequestMeta& meta, bool keep_alive) {
  state_ = State::kHandling;
  exchange_ = std::make_shared<Exchange>(meta.request_id, make_wake(),
                                         server_.options().max_stream_queue_bytes);
  // The session keeps no Responder: when the handler drops its last copy, the exchange is
  // abandoned and answers 500 by itself.
  run_handler(server_.router(), std::move(request), Exchange::make_responder(exchange_));
  std::optional<Exchange::Answer> answer = co_await wait_for_answer();
  if (!answer) {
    exchange_->cancel(CancelReason::kClientGone);
    log_request(meta, 499, " (client closed the connection before the answer)");
    end_exchange();
    co_return false;
  }
  bool keep = false;
  const bool may_keep = keep_alive && !stopping_ && !peer_done_sending_;
  if (answer->response) {
    keep = co_await write_response(meta, std::move(*answer->response), may_keep);
  } else {
    keep = co_await serve_stream(meta, std::move(*answer->stream), may_keep);
  }
  end_exchange();
  co_return keep;
}

// True when the signal timer expired; false when woken (or cancelled).
net::awaitable<bool> Session::wait_signal() {
  // A wake() that ran before this wait started (awaitable operators start their branches
  // asynchronously) is remembered here rather than lost.
  if (wake_pending_) co_return false;
  auto [ec] = co_await signal_.async_wait(kTuple);
  co_return !ec;
}

// Completes only when the peer fails (reset, or the other branch cancels it). Bytes of a
// pipelined next request are kept in buffer_ for the parser. EOF is not a disconnect: a
// client may half-close (shutdown(SHUT_WR)) after its request and still read the answer, so
// after EOF the socket is no longer read and the answer is written as usual (a client that
// closed entirely makes that write fail instead).
net::awaitable<void> Session::watch_peer() {
  while (true) {
    if (buffer_.size() >= kMaxPipelinedBytes || peer_done_sending_) {
      park_.expires_at(net::steady_timer::time_point::max());
      co_await park_.async_wait(kTuple);
      co_return;
    }
    auto [ec, n] = co_await stream_.socket().async_read_some(buffer_.prepare(4096), kTuple);
    buffer_.commit(n);
    if (ec == net::error::eof) {
      peer_done_sending_ = true;
      continue;
    }
    if (ec) co_return;
  }
}

// Waits until the handler answers; nullopt when the client went away first. Runs deadline
// callbacks when they fall due.
net::awaitable<std::optional<Exchange::Answer>> Session::wait_for_answer() {
  stream_.expires_never();
  while (true) {
    wake_pending_ = false;
    exchange_->fire_deadline_if_due(std::chrono::steady_clock::now());
    if (auto answer = exchange_->take_answer()) co_return answer;
    auto deadline = exchange_->deadline();
    if (deadline) {
      signal_.expires_at(*deadline);
    } else {
      signal_.expires_at(net::steady_timer::time_point::max());
    }
    auto woke = co_await (wait_signal() || watch_peer());
    if (woke.index() == 1) co_return std::nullopt;
  }
}

net::awaitable<bool> Session::serve_stream(RequestMeta& meta, StreamHead head, bool keep_alive) {
  state_ = State::kStreaming;
  const bool chunked = meta.version >= 11;  // HTTP/1.0: the stream ends with the connection
  if (!chunked) keep_alive = false;
  bhttp::response<bhttp::empty_body> res{static_cast<bhttp::status>(head.status), meta.version};
  res.set(bhttp::field::server, "kforge");
  res.set(bhttp::field::content_type, head.content_type);
  res.set(bhttp::field::cache_control, "no-cache");
  res.set("X-Accel-Buffering", "no");
  res.set("X-Request-Id", meta.request_id);
  for (const auto& [name, value] : meta.cors)
    res.insert(name, value);
  for (const auto& [name, value] : head.headers)
    res.insert(name, value);
  if (chunked) res.chunked(true);
  res.keep_alive(keep_alive);
  bhttp::response_serializer<bhttp::empty_body> serializer{res};
  stream_.expires_after(server_.options().write_timeout);
  auto [ec, n] = co_await bhttp::async_write_header(stream_, serializer, kTuple);
  if (ec) {
    exchange_->cancel(CancelReason::kClientGone);
    log_request(meta, 499, " (stream: client gone before the head)");
    co_return false;
  }
  while (true) {
    wake_pending_ = false;
    Exchange::StreamUpdate update = exchange_->take_stream_update();
    bool written = true;
    if (!update.bytes.empty()) written = co_await write_bytes(update.bytes, chunked);
    if (!written) {
      exchange_->cancel(CancelReason::kClientGone);
      log_request(meta, head.status, " (stream: client gone)");
      co_return false;
    }
    if (update.overflowed) {
      exchange_->cancel(CancelReason::kClientGone);
      log_request(meta, head.status, " (stream: client too slow, queue limit reached)");
      co_return false;
    }
    if (update.closed || stopping_ || exchange_->cancelled()) break;
    signal_.expires_after(head.keepalive_interval);
    auto woke = co_await (wait_signal() || watch_peer());
    if (woke.index() == 1) {
      exchange_->cancel(CancelReason::kClientGone);
      log_request(meta, head.status, " (stream: client closed it)");
      co_return false;
    }
    const bool idle = std::get<0>(woke);
    if (idle) written = co_await write_bytes(": keep-alive\n\n", chunked);
    if (!written) {
      exchange_->cancel(CancelReason::kClientGone);
      log_request(meta, head.status, " (stream: client gone)");
      co_return false;
    }
  }
  if (chunked) {
    stream_.expires_after(server_.options().write_timeout);
    auto [ec_last, n_last] = co_await net::async_write(stream_, bhttp::make_chunk_last(), kTuple);
    if (ec_last) keep_alive = false;
  }
  log_request(meta, head.status, " (stream)");
  co_return keep_alive && !stopping_;
}

net::awaitable<bool> Session::write_bytes(std::string_view bytes, bool chunked) {
  stream_.expires_after(server_.options().write_timeout);
  if (chunked) {
    auto [ec, n] = co_await net::async_write(
        stream_, bhttp::make_chunk(net::const_buffer(bytes.data(), bytes.size())), kTuple);
    co_return !ec;
  }
  auto [ec, n] =
      co_await net::async_write(stream_, net::buffer(bytes.data(), bytes.size()), kTuple);
  co_return !ec;
}

net::awaitable<bool> Session::write_response(const RequestMeta& meta, HttpResponse response,
                                             bool keep_alive) {
  state_ = State::kWriting;
  bhttp::response<bhttp::string_body> res;
  res.version(meta.version);
  res.result(static_cast<unsigned>(response.status));
  res.set(bhttp::field::server, "kforge");
  res.set(bhttp::field::content_type, response.content_type);
  res.set("X-Request-Id", meta.request_id);
  for (const auto& [name, value] : meta.cors) {
    // A CORS preflight answer already carries them; a repeated Allow-Origin fails in browsers.
    bool present = std::any_of(response.headers.begin(), response.headers.end(),
                               [&n = name](const auto& h) { return iequals(h.first, n); });
    if (!present) res.insert(name, value);
  }
  for (const auto& [name, value] : response.headers)
    res.insert(name, value);
  res.body() = std::move(response.body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  stream_.expires_after(server_.options().write_timeout);
  auto [ec, n] = co_await bhttp::async_write(stream_, res, kTuple);
  std::string note;
  if (ec) note = " (write failed: " + ec.message() + ")";
  log_request(meta, response.status, note);
  co_return !ec && keep_alive;
}

// Half-closes, then reads for a moment so that a client still sending a refused body gets
// our response instead of a reset.
net::awaitable<void> Session::close_connection() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (!ec && stream_.socket().is_open()) {
    stream_.expires_after(kLingerTime);
    std::array<char, 16384> scratch{};
    size_t drained = 0;
    while (drained < server_.options().max_body_bytes + kMaxPipelinedBytes) {
      auto [read_ec, n] =
          co_await stream_.async_read_some(net::buffer(scratch.data(), scratch.size()), kTuple);
      if (read_ec) break;
      drained += n;
    }
  }
  stream_.close();
}

}  // namespace

std::shared_ptr<Connection> make_connection(tcp::socket socket, ServerCore& server, uint64_t id) {
  return std::make_shared<Session>(std::move(socket), server, id);
}

}  // namespace kforge::frontends::http
