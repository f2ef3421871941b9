// Internal to the HTTP frontend. ServerCore owns the listening socket, the io_context and its
// threads, the registry of live connections and the graceful stop (http_server.cc, Asio
// only). A Connection is one accepted socket, served by the Beast session in
// http_session.cc, the only translation unit that includes Beast.
//
// Stop sequence: stop() closes the acceptor, calls on_server_stop() on every connection (on
// its strand) and arms the drain timer; when the last connection ends the timer is cancelled
// and run() returns; if it fires first, force_close() ends the stragglers.
//
// Gate: exchanges may outlive the server (a JobService callback may hold one), so their
// wake-ups go through a Gate that ServerCore closes before its io_context is destroyed.
//
// Connection cap: every connection reports its Phase; at `max_connections`, a new socket
// evicts the connection waiting longest for a request (then the one receiving a head the
// longest), or is answered 503 and closed when every connection is busy.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/http/access_policy.h"
#include "kforge/frontends/http/http_server.h"
#include "kforge/frontends/http/router.h"

namespace kforge::frontends::http {

// Closes the path from exchanges to the io_context once the server is being destroyed.
struct Gate {
  Mutex mu;
  bool open GUARDED_BY(mu) = true;
};

class ServerCore;

// What a connection is doing, for the connection cap.
enum class ConnectionPhase {
  kAwaitingRequest,  // no byte of the next request yet (a new or kept-alive connection)
  kReceivingHead,    // part of a request head has arrived
  kBusy,             // reading a body, handling, writing or streaming: never evicted
};

// One accepted connection. Every method but executor() and start() runs on executor().
class Connection {
 public:
  virtual ~Connection() = default;
  // The connection's strand.
  virtual boost::asio::any_io_executor executor() = 0;
  // Begins serving (spawns the session coroutine). Called once.
  virtual void start() = 0;
  // Graceful stop: close when idle; in-flight exchanges are told (kServerStopping) and may
  // still be answered.
  virtual void on_server_stop() = 0;
  // The drain is over, or the connection is evicted for a new one: close the socket now.
  virtual void force_close() = 0;
};

// Implemented in http_session.cc. The connection calls server.unregister_connection(id)
// when it is destroyed.
std::shared_ptr<Connection> make_connection(boost::asio::ip::tcp::socket socket, ServerCore& server,
                                            uint64_t id);

class ServerCore {
 public:
  ServerCore(HttpServer::Options options, Router router, bool loopback_bind);
  ~ServerCore();
  ServerCore(const ServerCore&) = delete;
  ServerCore& operator=(const ServerCore&) = delete;

  // Opens, binds and listens (kUnavailable on failure); then start() spawns the accept loop.
  Status listen(const boost::asio::ip::tcp::endpoint& endpoint);
  void start();
  void run();
  void stop();
  uint16_t port() const { return port_; }

  // For connections (thread-safe).
  const HttpServer::Options& options() const { return options_; }
  const Router& router() const { return router_; }
  const AccessPolicy& policy() const { return policy_; }
  const std::shared_ptr<Gate>& gate() const { return gate_; }
  void unregister_connection(uint64_t id);
  void set_phase(uint64_t id, ConnectionPhase phase);

 private:
  boost::asio::awaitable<void> accept_loop();
  void start_connection(boost::asio::ip::tcp::socket socket);
  // At the cap: marks the connection to evict and returns it (null when all are busy).
  std::shared_ptr<Connection> pick_eviction_locked() REQUIRES(mu_);
  std::vector<std::shared_ptr<Connection>> live_connections();
  bool no_connections();
  void force_close_all();

  const HttpServer::Options options_;
  const Router router_;
  const AccessPolicy policy_;
  const std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::atomic<uint16_t> port_{0};

  Mutex mu_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool destroying_ GUARDED_BY(mu_) = false;
  struct Entry {
    std::weak_ptr<Connection> connection;
    ConnectionPhase phase = ConnectionPhase::kAwaitingRequest;
    std::chrono::steady_clock::time_point since;  // when it entered `phase`
    bool evicting = false;                        // closing for a newer connection
  };
  uint64_t next_connection_id_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Entry> connections_ GUARDED_BY(mu_);
  size_t evicting_ GUARDED_BY(mu_) = 0;  // entries with `evicting`
  uint64_t evicted_total_ GUARDED_BY(mu_) = 0;
  uint64_t refused_total_ GUARDED_BY(mu_) = 0;

  // Asio objects last: destroyed first, while the registry above still exists.
  boost::asio::io_context ioc_;
  boost::asio::strand<boost::asio::io_context::executor_type> control_;  // acceptor, drain timer
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer drain_timer_;
};

}  // namespace kforge::frontends::http
