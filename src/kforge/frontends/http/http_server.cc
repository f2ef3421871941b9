// HttpServer and ServerCore (server_core.h): listening, io threads, connection registry and
// graceful stop. Asio only; the per-connection HTTP code is in http_session.cc.
#include "kforge/frontends/http/http_server.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <thread>

#include "kforge/common/log.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/http/server_core.h"

namespace kforge::frontends::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
constexpr auto kTuple = net::as_tuple(net::use_awaitable);
}  // namespace

// ---------------------------------------------------------------------------------------
// ServerCore

ServerCore::ServerCore(HttpServer::Options options, Router router, bool loopback_bind)
    : options_(std::move(options)),
      router_(std::move(router)),
      policy_(AccessPolicy::Options{options_.token, options_.allowed_origins, loopback_bind}),
      ioc_(std::max(1, options_.io_threads)),
      control_(net::make_strand(ioc_)),
      acceptor_(control_),
      drain_timer_(control_) {}

ServerCore::~ServerCore() {
  {
    std::lock_guard lock(gate_->mu);
    gate_->open = false;
  }
  std::lock_guard lock(mu_);
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
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;  // the socket closes on return
    uint64_t id = next_connection_id_++;
    connection = make_connection(std::move(socket), *this, id);
    connections_[id] = connection;
  }
  connection->start();
}

void ServerCore::unregister_connection(uint64_t id) {
  std::lock_guard lock(mu_);
  connections_.erase(id);
  if (stopping_ && !destroying_ && connections_.empty()) {
    // The drain is over: release the drain timer so run() can return.
    net::post(control_, [this] {
      if (no_connections()) drain_timer_.cancel();
    });
  }
}

bool ServerCore::no_connections() {
  std::lock_guard lock(mu_);
  return connections_.empty();
}

std::vector<std::shared_ptr<Connection>> ServerCore::live_connections() {
  std::vector<std::shared_ptr<Connection>> live;
  std::lock_guard lock(mu_);
  for (auto& [id, weak] : connections_) {
    if (auto s = weak.lock()) live.push_back(std::move(s));
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
    std::lock_guard lock(mu_);
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

Status HttpServer::check_bind_policy(const std::string& host, bool host_is_loopback,
                                     const std::string& token) {
  if (host_is_loopback || !token.empty()) return Status::ok();
  return failed_precondition("refusing to bind " + host +
                             " without an API token: set --token or KFORGE_TOKEN");
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
  boost::system::error_code ec;
  net::ip::address address = net::ip::make_address(options.host, ec);
  if (ec) {
    // A host name: resolve it (at startup only, so blocking is fine).
    net::io_context resolver_ioc;
    tcp::resolver resolver(resolver_ioc);
    auto results = resolver.resolve(options.host, std::to_string(options.port), ec);
    if (ec || results.empty()) {
      return invalid_argument("cannot resolve '" + options.host + "': " + ec.message(), "host");
    }
    address = results.begin()->endpoint().address();
  }
  KF_RETURN_IF_ERROR(check_bind_policy(options.host, address.is_loopback(), options.token));
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
