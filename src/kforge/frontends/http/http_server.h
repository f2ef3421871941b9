// HttpServer: kforge's HTTP/1.1 listener (Boost.Beast + Asio, C++20 coroutines). It owns the
// sockets and the io threads; what a request means is decided by a Router (router.h) whose
// handlers answer through a Responder (responder.h). REST routes come from rest_handlers.h;
// other frontends (MCP on /mcp) add their routes to the same Router before the server starts.
//
// Behaviour on the wire:
// - Keep-alive and pipelining; one request at a time per connection.
// - At most `max_connections` connections. When a new one arrives at the cap, the
//   connection idle the longest (waiting for a request; then, failing that, the one whose
//   head has been arriving the longest) is closed to make room; if every connection is
//   busy with a request, the newcomer gets 503 and is closed at once.
// - Timeouts: a connection may wait `idle_timeout` for the first byte of a request; from
//   that byte the whole head must arrive within `header_timeout`, the body within
//   `body_timeout`, and each write must finish within `write_timeout`.
// - A client that half-closes (shutdown(SHUT_WR)) after sending its request still gets the
//   answer; the connection closes after it.
// - Framing per RFC 9112 (http_reader.h): Transfer-Encoding other than exactly "chunked",
//   or together with Content-Length, is 400.
// - Body limit `max_body_bytes` per request: refused from Content-Length before the body is
//   read, and enforced while reading chunked bodies (413). `Expect: 100-continue` is answered
//   (with 100, or with the refusal) before the client sends the body.
// - Access checks (token, Origin, Host; access_policy.h) on the request head, before the body.
// - Malformed HTTP: 400 (431 for oversized headers), then the connection is closed.
// - Every response carries `X-Request-Id` (the client's, when it sent a sane one).
// - A client that disconnects while its handler works cancels the exchange
//   (CancelReason::kClientGone), so the handler can drop its subscriptions.
// - One log line per request (debug; warn for 5xx): method, path, status, milliseconds.
//
// Security: refuses (kFailedPrecondition) to bind a non-loopback address without a token.
//
// Thread-safety: `stop()` and `bound_port()` may be called from any thread; `run()` from one
// thread at a time. Destroy the server only after `run()` has returned (or was never called).
//
// Example:
//   boost::asio::thread_pool pool(4);
//   KF_ASSIGN_OR_RETURN(auto server, HttpServer::create(options, job_service, pool));
//   std::thread stopper([&] { wait_for_signal(); server->stop(); });
//   server->run();  // returns after stop() and the drain
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/frontends/http/api_tokens.h"
#include "kforge/frontends/http/rest_handlers.h"
#include "kforge/frontends/http/router.h"
#include "kforge/jobs/job_service.h"

namespace boost::asio {
class thread_pool;
}  // namespace boost::asio

namespace kforge::frontends::http {

class ServerCore;

class HttpServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    uint16_t port = 8000;          // 0 = an ephemeral port (see bound_port())
    std::string token;             // API token (access_policy.h); a non-loopback host needs a token
    std::vector<ApiToken> tokens;  // more tokens with their principals (api_tokens.h)
    size_t max_body_bytes = size_t{16} << 20;
    int io_threads = 1;
    std::vector<std::string> allowed_origins;  // see access_policy.h
    size_t max_header_bytes = size_t{64} << 10;
    // Open connections at once (see above); keep it well under RLIMIT_NOFILE.
    size_t max_connections = 1024;
    // A connection with no request under way is closed after this long.
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(60)};
    // From the first byte of a request to the end of its head, and for its body.
    std::chrono::milliseconds header_timeout{std::chrono::seconds(30)};
    std::chrono::milliseconds body_timeout{std::chrono::seconds(60)};
    std::chrono::milliseconds write_timeout{std::chrono::seconds(30)};
    // After stop(), in-flight exchanges get this long to finish before sockets are closed.
    std::chrono::milliseconds drain_timeout{std::chrono::seconds(10)};
    // Stream bytes a slow client may leave unread before its connection is closed.
    size_t max_stream_queue_bytes = size_t{8} << 20;
    // Used by the JobService factory for the REST routes.
    RestOptions rest;
  };

  // A server with the REST routes (rest_handlers.h), blocking work on `blocking_pool`.
  // `service` and `blocking_pool` must outlive the server and the pool's tasks.
  static StatusOr<std::unique_ptr<HttpServer>> create(Options options, jobs::JobService& service,
                                                      boost::asio::thread_pool& blocking_pool);

  // A server answering with `router` (REST, MCP, test routes, ...). Binds and listens before
  // returning: kFailedPrecondition for a non-loopback host without a token, kInvalidArgument
  // for a bad option, kUnavailable when the address cannot be bound.
  static StatusOr<std::unique_ptr<HttpServer>> create(Options options, Router router);

  // The address `host` names: a literal address, or a name resolved (blocking, at start-up
  // only) to its first address. kInvalidArgument (field "host") when it does not resolve.
  static StatusOr<std::string> resolve_host(const std::string& host);

  // Checks the bind policy alone: a `host` that is not a loopback address (127.0.0.0/8 or ::1,
  // after resolution: "127.0.0.1.nip.io" is a name, not an address) needs a token
  // (`has_token`). kInvalidArgument when the host does not resolve, kFailedPrecondition when a
  // token is needed and missing.
  static Status check_bind_policy(const std::string& host, bool has_token);

  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port actually bound (useful with port 0).
  uint16_t bound_port() const;

  // Serves on the calling thread plus `io_threads - 1` more until stop() and the drain
  // finish. Returns immediately if stop() was called before.
  void run();

  // Graceful stop: stops accepting, closes idle connections, tells in-flight exchanges
  // (CancelReason::kServerStopping) and lets them finish for up to `drain_timeout`, then
  // closes what is left. Idempotent; returns without waiting.
  void stop();

 private:
  explicit HttpServer(std::unique_ptr<ServerCore> core);
  std::unique_ptr<ServerCore> core_;
};

}  // namespace kforge::frontends::http
