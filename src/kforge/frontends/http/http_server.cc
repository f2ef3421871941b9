// HttpServer and ServerCore (server_core.h): listening, io threads, connection registry and
// graceful stop. Asio only; the per-connection HTTP code is in http_session.cc.
#include "kforge/frontends/http/http_server.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <thread>

#include "kforge/common/error_mapping.h"
#include "kforge/common/log.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/http/server_core.h"

namespace kforge::frontends::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
constexpr auto kTuple = net::as_tuple(net::use_awaitable);

// Written to a connection refused at the cap, before it is closed.
const std::string& too_many_connections_response() {
  static const std::string response = [] {
    const std::string body =
        error_body(unavailable("too many open connections (--max-connections); retry shortly"))
            .dump();
    return "HTTP/1.1 503 Service Unavailable\r\nServer: kforge\r\n"
           "Content-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n"
           "Content-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }();
  return response;
}

// Refuses a socket at once without reading from it: best effort, never blocks.
void refuse_connection(tcp::socket& socket) {
  boost::system::error_code ec;
  socket.non_blocking(true, ec);
  const std::string& response = too_many_connections_response();
  socket.write_some(net::buffer(response.data(), response.size()), ec);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// ServerCore

ServerCore::ServerCore(HttpServer::Options options, Router router, bool loopback_bind)
    : options_(std::move(options)),
      router_(std::move(router)),
      policy_(AccessPolicy::Options{options_.token, options_.allowed_origins, loopback_bind,
                                    options_.tokens}),
      ioc_(std::max(1, options_.io_threads)),
      control_(net::make_strand(ioc_)),
      acceptor_(control_),
      drain_timer_(control_) {}

ServerCore::~ServerCore() {
  {
    MutexLock lock(gate_->mu);
    gate_->open = false;
  }
  MutexLock lock(mu_);
  destroying_ = true;
}

void ServerCore::start() {
  net::co_spawn(control_, accept_loop(), net::detached);
}

Status ServerCore::listen(const tcp::endpoint& endpoint) {
  boost::system::error_code ec;
  auto fail = [&](const char* what) {
    return Status(ErrorCode::kUnavailable,
                  std::string("cannot ") + what + " " + endpoint.address().to_string() + ":" +
                      std::to_string(endpoint.port()) + ": " + ec.message());
  };
  if (acceptor_.open(endpoint.protocol(), ec)) return fail("open a socket for");
  if (acceptor_.set_option(net::socket_base::reuse_address(true), ec)) return fail("configure");
  if (acceptor_.bind(endpoint, ec)) return fail("bind");
  if (acceptor_.listen(net::socket_base::max_listen_connections, ec)) return fail("listen on");
  port_ = acceptor_.local_endpoint(ec).port();
  return Status::ok();
}

net::awaitable<void> ServerCore::accept_loop() {
  net::steady_timer backoff(control_);
  while (true) {
    auto [ec, socket] = co_await acceptor_.async_accept(net::make_strand(ioc_), kTuple);
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) co_return;
      KF_LOG_WARN("http accept failed: {}", ec.message());
      backoff.expires_after(std::chrono::milliseconds(100));  // e.g. out of descriptors
      co_await backoff.async_wait(kTuple);
      continue;
    }
    start_connection(std::move(socket));
  }
}

void ServerCore::start_connection(tcp::socket socket) {
  boost::system::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  std::shared_ptr<Connection> connection;
  std::shared_ptr<Connection> evicted;
  {
    MutexLock lock(mu_);
    if (stopping_) return;  // the socket closes on return
    if (connections_.size() - evicting_ >= options_.max_connections) {
      evicted = pick_eviction_locked();
      if (evicted == nullptr) {
        ++refused_total_;
        if (refused_total_ == 1 || refused_total_ % 1000 == 0) {
          KF_LOG_WARN("http: {} connections are busy (--max-connections); refused {} so far",
                      connections_.size(), refused_total_);
        }
        refuse_connection(socket);
        return;
      }
    }
    uint64_t id = next_connection_id_++;
    connection = make_connection(std::move(socket), *this, id);
    Entry entry;
    entry.connection = connection;
    entry.since = std::chrono::steady_clock::now();
    connections_.emplace(id, std::move(entry));
  }
  if (evicted != nullptr) {
    net::post(evicted->executor(), [evicted] { evicted->force_close(); });
  }
  connection->start();
}

std::shared_ptr<Connection> ServerCore::pick_eviction_locked() {
  // The oldest idle connection first; a head that is still arriving only when none is idle.
  for (ConnectionPhase phase :
       {ConnectionPhase::kAwaitingRequest, ConnectionPhase::kReceivingHead}) {
    Entry* oldest = nullptr;
    std::shared_ptr<Connection> live;
    for (auto& [id, entry] : connections_) {
      if (entry.evicting || entry.phase != phase) continue;
      if (oldest != nullptr && entry.since >= oldest->since) continue;
      if (auto c = entry.connection.lock()) {
        oldest = &entry;
        live = std::move(c);
      }
    }
    if (oldest != nullptr) {
      oldest->evicting = true;
      ++evicting_;
      if (++evicted_total_ == 1 || evicted_total_ % 1000 == 0) {
        KF_LOG_WARN("http: at --max-connections ({}); closed {} idle connections so far",
                    options_.max_connections, evicted_total_);
      }
      return live;
    }
  }
  return nullptr;
}

void ServerCore::set_phase(uint64_t id, ConnectionPhase phase) {
  MutexLock lock(mu_);
  auto it = connections_.find(id);
  if (it == connections_.end() || it->second.phase == phase) return;
  it->second.phase = phase;
  it->second.since = std::chrono::steady_clock::now();
}

void ServerCore::unregister_connection(uint64_t id) {
  MutexLock lock(mu_);
  if (auto it = connections_.find(id); it != connections_.end()) {
    if (it->second.evicting) --evicting_;
    connections_.erase(it);
  }
  if (stopping_ && !destroying_ && connections_.empty()) {
    // The drain is over: release the drain timer so run() can return.
    net::post(control_, [this] {
      if (no_connections()) drain_timer_.cancel();
    });
  }
}

bool ServerCore::no_connections() {
  MutexLock lock(mu_);
  return connections_.empty();
}

std::vector<std::shared_ptr<Connection>> ServerCore::live_connections() {
  std::vector<std::shared_ptr<Connection>> live;
  MutexLock lock(mu_);
  for (auto& [id, entry] : connections_) {
    if (auto s = entry.connection.lock()) live.push_back(std::move(s));
  }
  return live;
}

void ServerCore::run() {
  std::vector<std::thread> extra;
  for (int i = 1; i < options_.io_threads; ++i)
    extra.emplace_back([this] { ioc_.run(); });
  ioc_.run();
  for (auto& t : extra)
    t.join();
}

void ServerCore::stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  KF_LOG_INFO("http server stopping: draining for up to {} ms", options_.drain_timeout.count());
  net::post(control_, [this] {
    boost::system::error_code ec;
    acceptor_.close(ec);
    if (no_connections()) return;
    drain_timer_.expires_after(options_.drain_timeout);
    drain_timer_.async_wait([this](const boost::system::error_code& wait_ec) {
      if (wait_ec) return;  // every connection ended in time
      KF_LOG_WARN("http drain timeout: closing the remaining connections");
      force_close_all();
      drain_timer_.expires_after(std::chrono::seconds(1));
      drain_timer_.async_wait([this](const boost::system::error_code& last_ec) {
        if (!last_ec) ioc_.stop();
      });
    });
  });
  for (auto& connection : live_connections()) {
    net::post(connection->executor(), [connection] { connection->on_server_stop(); });
  }
}

void ServerCore::force_close_all() {
  for (auto& connection : live_connections()) {
    net::post(connection->executor(), [connection] { connection->force_close(); });
  }
}

// ---------------------------------------------------------------------------------------
// HttpServer

namespace {

StatusOr<net::ip::address> resolve_address(const std::string& host) {
  boost::system::error_code ec;
  net::ip::address address = net::ip::make_address(host, ec);
  if (!ec) return address;
  // A host name: resolve it (at startup only, so blocking is fine).
  net::io_context resolver_ioc;
  tcp::resolver resolver(resolver_ioc);
  auto results = resolver.resolve(host, "0", ec);
  if (ec || results.empty()) {
    return invalid_argument("cannot resolve '" + host + "' to an address to listen on" +
                                (ec ? ": " + ec.message() : std::string()),
                            "host");
  }
  return results.begin()->endpoint().address();
}

Status bind_policy(const std::string& host, const net::ip::address& address, bool has_token) {
  if (address.is_loopback() || has_token) return Status::ok();
  std::string what = host == address.to_string() ? host : host + " (" + address.to_string() + ")";
  return failed_precondition("refusing to bind " + what +
                             " without an API token: set --token-file, --tokens-file, --token or "
                             "KFORGE_TOKEN");
}

}  // namespace

StatusOr<std::string> HttpServer::resolve_host(const std::string& host) {
  KF_ASSIGN_OR_RETURN(net::ip::address address, resolve_address(host));
  return address.to_string();
}

Status HttpServer::check_bind_policy(const std::string& host, bool has_token) {
  KF_ASSIGN_OR_RETURN(net::ip::address address, resolve_address(host));
  return bind_policy(host, address, has_token);
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::create(Options options, jobs::JobService& service,
                                                         boost::asio::thread_pool& blocking_pool) {
  Router router;
  KF_RETURN_IF_ERROR(
      add_rest_routes(router, service, make_blocking_executor(blocking_pool), options.rest));
  return create(std::move(options), std::move(router));
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::create(Options options, Router router) {
  if (options.io_threads < 1 || options.io_threads > 256) {
    return invalid_argument("must be between 1 and 256", "io_threads");
  }
  if (options.max_body_bytes == 0) return invalid_argument("must be positive", "max_body_bytes");
  if (options.max_connections == 0) {
    return invalid_argument("must be positive", "max_connections");
  }
  KF_ASSIGN_OR_RETURN(net::ip::address address, resolve_address(options.host));
  KF_RETURN_IF_ERROR(
      bind_policy(options.host, address, !options.token.empty() || !options.tokens.empty()));
  tcp::endpoint endpoint(address, options.port);
  auto core =
      std::make_unique<ServerCore>(std::move(options), std::move(router), address.is_loopback());
  KF_RETURN_IF_ERROR(core->listen(endpoint));
  core->start();
  KF_LOG_INFO("http server listening on {}:{}", address.to_string(), core->port());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(core)));
}

HttpServer::HttpServer(std::unique_ptr<ServerCore> core) : core_(std::move(core)) {}

HttpServer::~HttpServer() = default;

uint16_t HttpServer::bound_port() const {
  return core_->port();
}

void HttpServer::run() {
  core_->run();
}

void HttpServer::stop() {
  core_->stop();
}

}  // namespace kforge::frontends::http
