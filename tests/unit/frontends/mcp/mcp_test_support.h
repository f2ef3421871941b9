// Helpers of the MCP unit tests: a ReplyChannel that records what a request produced, an
// executor that runs each task on its own thread (joined at destruction), and message
// builders.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/mcp/protocol/dispatcher.h"
#include "kforge/frontends/mcp/protocol/jsonrpc.h"
#include "kforge/frontends/mcp/protocol/request_context.h"

namespace kforge::testing {

class RecordingChannel : public frontends::mcp::ReplyChannel {
 public:
  void send_related(const Json& message) override {
    std::lock_guard lock(mu_);
    related_.push_back(message);
    cv_.notify_all();
  }
  void send_response(const Json& response) override {
    std::lock_guard lock(mu_);
    ++responses_;
    response_ = response;
    cv_.notify_all();
  }
  void abandon() override {
    std::lock_guard lock(mu_);
    abandoned_ = true;
    cv_.notify_all();
  }

  // The response, waiting up to `timeout` for it; nullopt if none came.
  std::optional<Json> response(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return response_.has_value(); });
    return response_;
  }
  // Waits until at least `n` related messages were sent.
  std::vector<Json> related(size_t n = 0,
                            std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return related_.size() >= n; });
    return related_;
  }
  bool wait_abandoned(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return abandoned_; });
  }
  int response_count() {
    std::lock_guard lock(mu_);
    return responses_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Json> related_;
  std::optional<Json> response_;
  int responses_ = 0;
  bool abandoned_ = false;
};

// Runs every task on a new thread; the destructor joins them.
class ThreadExecutor {
 public:
  ~ThreadExecutor() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads)
      t.join();
  }
  frontends::http::BlockingExecutor executor() {
    return [this](std::function<void()> task) {
      std::lock_guard lock(mu_);
      threads_.emplace_back(std::move(task));
    };
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

inline frontends::mcp::jsonrpc::Message message_of(const Json& j) {
  auto m = frontends::mcp::jsonrpc::classify(j);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : frontends::mcp::jsonrpc::Message{};
}

inline Json rpc_request(Json id, const std::string& method, Json params = nullptr) {
  return frontends::mcp::jsonrpc::make_request(id, method, std::move(params));
}

inline Json initialize_params(const std::string& version = "2025-11-25",
                              Json capabilities = Json::object()) {
  return Json{{"protocolVersion", version},
              {"capabilities", std::move(capabilities)},
              {"clientInfo", {{"name", "unit"}, {"version", "1"}}}};
}

}  // namespace kforge::testing
