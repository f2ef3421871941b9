// Runs a real HttpServer on 127.0.0.1:<ephemeral> in-process for the HTTP tests, plus a
// small thread-safe recorder tests use to observe what handlers saw.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kforge/frontends/http/http_server.h"

namespace kforge::testing {

class ServerHarness {
 public:
  using HttpServer = frontends::http::HttpServer;

  // Starts serving; check ok() (a failure is also reported to gtest).
  explicit ServerHarness(StatusOr<std::unique_ptr<HttpServer>> server) {
    if (!server.is_ok()) {
      ADD_FAILURE() << "HttpServer::create failed: " << server.status().to_string();
      return;
    }
    server_ = std::move(server).value();
    runner_ = std::thread([this] { server_->run(); });
    io_thread_id_ = runner_.get_id();
  }
  ~ServerHarness() { stop(); }
  ServerHarness(const ServerHarness&) = delete;
  ServerHarness& operator=(const ServerHarness&) = delete;

  bool ok() const { return server_ != nullptr; }
  uint16_t port() const { return server_->bound_port(); }
  // The thread that runs the io loop (io_threads == 1).
  std::thread::id io_thread() const { return io_thread_id_; }

  // Stops the server and waits for run() to return. Idempotent.
  void stop() {
    if (runner_.joinable()) {
      server_->stop();
      runner_.join();
    }
  }

  // Waits up to `timeout` for run() to return after a stop().
  bool stop_within(std::chrono::milliseconds timeout) {
    if (!runner_.joinable()) return true;
    server_->stop();
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::thread joiner([&] {
      runner_.join();
      std::lock_guard lock(mu);
      done = true;
      cv.notify_all();
    });
    std::unique_lock lock(mu);
    bool in_time = cv.wait_until(lock, deadline, [&] { return done; });
    lock.unlock();
    joiner.join();
    return in_time;
  }

 private:
  std::unique_ptr<HttpServer> server_;
  std::thread runner_;
  std::thread::id io_thread_id_ = {};
};

// A list of values appended from any thread, with a wait for a given count.
template <typename T>
class Recorder {
 public:
  void add(T value) {
    std::lock_guard lock(mu_);
    values_.push_back(std::move(value));
    cv_.notify_all();
  }
  bool wait_for(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return values_.size() >= n; });
  }
  std::vector<T> values() const {
    std::lock_guard lock(mu_);
    return values_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<T> values_;
};

}  // namespace kforge::testing
