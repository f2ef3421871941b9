// One HTTP/1.1 connection (Boost.Beast + C++20 coroutines). The only translation unit that
// includes Beast: it costs ~30 s and ~1 GB to compile, so keep HTTP parsing here.
//
// A Session loops: read a request head; refuse it early (access checks, Content-Length over
// the limit) or answer `Expect: 100-continue`; read the body (limit enforced for chunked
// bodies too); run the route's handler with a Responder over a fresh Exchange; wait, without
// blocking, for the answer while watching the socket for a disconnect and firing deadlines;
// then write the response, or a chunked event stream with keep-alive comments.
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
#include "kforge/frontends/http/exchange.h"
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

bool sane_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.' || c == ':';
    if (!ok) return false;
  }
  return true;
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
  net::awaitable<bool> serve_one();
  net::awaitable<bool> read_body(bhttp::request_parser<bhttp::string_body>& parser,
                                 const RequestMeta& meta);
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

  ServerCore& server_;
  const uint64_t id_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  net::steady_timer signal_;  // woken by wake(); also the deadline and keep-alive timer
  net::steady_timer park_;    // parks watch_peer() when the pipelining buffer is full
  std::shared_ptr<Exchange> exchange_;
  State state_ = State::kIdle;
  bool wake_pending_ = false;
  bool stopping_ = false;
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
    std::lock_guard lock(gate->mu);
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

HttpResponse malformed_request_response(const beast::error_code& ec) {
  if (ec == bhttp::error::header_limit) {
    return HttpResponse::error(431, invalid_argument("request header is too large"));
  }
  return HttpResponse::error(400, invalid_argument("malformed HTTP request: " + ec.message()));
}

HttpRequest request_from_head(const bhttp::request<bhttp::string_body>& head) {
  HttpRequest request;
  request.method = std::string(head.method_string());
  request.target = std::string(head.target());
  request.path = std::string(split_target(request.target).first);
  for (const auto& field : head) {
    std::string name(field.name_string());
    for (char& c : name) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    request.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  const std::string* client_id = request.header("x-request-id");
  if (client_id != nullptr && sane_request_id(*client_id)) {
    request.request_id = *client_id;
  } else {
    request.request_id = random_hex(8);
  }
  return request;
}

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

// Access checks and the Content-Length limit, on the head alone.
std::optional<HttpResponse> refusal_for(const HttpRequest& request,
                                        boost::optional<std::uint64_t> content_length,
                                        const ServerCore& server) {
  std::string allow;
  if (request.method == "OPTIONS") allow = server.router().allowed_methods(request.path);
  std::optional<HttpResponse> refusal = server.policy().check(request, allow);
  if (refusal) return refusal;
  const size_t limit = server.options().max_body_bytes;
  if (content_length && *content_length > limit) {
    return HttpResponse::error(
        Status(ErrorCode::kPayloadTooLarge, "request body of " + std::to_string(*content_length) +
                                                " bytes exceeds the limit of " +
                                                std::to_string(limit) + " bytes"));
  }
  return std::nullopt;
}

HttpResponse body_error_response(const beast::error_code& ec, size_t limit) {
  if (ec == bhttp::error::body_limit) {
    return HttpResponse::error(
        Status(ErrorCode::kPayloadTooLarge,
               "request body exceeds the limit of " + std::to_string(limit) + " bytes"));
  }
  return HttpResponse::error(invalid_argument("malformed HTTP body: " + ec.message()));
}

// Runs the handler. The caller passes a temporary Responder, so the session holds none.
void run_handler(const Router& router, HttpRequest request, const Responder& responder) {
  try {
    router.dispatch(std::move(request), responder);
  } catch (const std::exception& e) {
    responder.send(HttpResponse::error(internal_error(std::string("dispatch: ") + e.what())));
  }
}

net::awaitable<bool> Session::serve_one() {
  const auto& options = server_.options();
  state_ = State::kIdle;
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(options.max_header_bytes));
  parser.body_limit(boost::none);  // checked against Content-Length after the access checks
  if (buffer_.size() > 0) {
    stream_.expires_after(options.read_timeout);
  } else {
    stream_.expires_after(options.idle_timeout);
  }
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
  HttpRequest request = request_from_head(parser.get());
  RequestMeta meta = meta_for(request, parser.get().version(), server_.policy(), started);
  const bool keep_alive = parser.get().keep_alive();
  std::optional<HttpResponse> refusal = refusal_for(request, parser.content_length(), server_);
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
net::awaitable<bool> Session::read_body(bhttp::request_parser<bhttp::string_body>& parser,
                                        const RequestMeta& meta) {
  if (parser.is_done()) co_return true;
  const auto& options = server_.options();
  parser.body_limit(options.max_body_bytes);
  auto expect = parser.get()[bhttp::field::expect];
  if (meta.version >= 11 && beast::iequals(expect, "100-continue")) {
    bhttp::response<bhttp::empty_body> go_on{bhttp::status::continue_, meta.version};
    stream_.expires_after(options.write_timeout);
    auto [ec, n] = co_await bhttp::async_write(stream_, go_on, kTuple);
    if (ec) co_return false;
  }
  stream_.expires_after(options.read_timeout);
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
  const bool may_keep = keep_alive && !stopping_;
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

// Completes only when the peer closes or fails (or when cancelled by the other branch).
// Bytes of a pipelined next request are kept in buffer_ for the parser. A client that
// half-closes its side while waiting reads as gone (EOF), as with nginx's 499.
net::awaitable<void> Session::watch_peer() {
  while (true) {
    if (buffer_.size() >= kMaxPipelinedBytes) {
      park_.expires_at(net::steady_timer::time_point::max());
      co_await park_.async_wait(kTuple);
      co_return;
    }
    auto [ec, n] = co_await stream_.socket().async_read_some(buffer_.prepare(4096), kTuple);
    if (ec) co_return;
    buffer_.commit(n);
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
                               [&name](const auto& h) { return iequals(h.first, name); });
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
