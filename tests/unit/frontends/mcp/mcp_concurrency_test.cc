// The MCP frontend's shared state under concurrent use, for ThreadSanitizer (these tests are
// also in kforge_tsan_tests): many clients at once on the Streamable HTTP transport of a real
// server (sessions created, used and deleted; GET streams ended by a DELETE; tool calls whose
// jobs finish while notifications/cancelled race them), the session store at its limits, and
// the task book's files and maps written from several threads. The assertions are the
// outcomes every interleaving must give; TSan reports any data race on the way.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "fakes/fake_job_service.h"
#include "frontends/http/raw_http_client.h"
#include "frontends/http/server_harness.h"
#include "kforge/common/files.h"
#include "kforge/common/random.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/http/http_server.h"
#include "kforge/frontends/mcp/http_transport.h"
#include "kforge/frontends/mcp/protocol/dispatcher.h"
#include "kforge/frontends/mcp/protocol/session_store.h"
#include "kforge/frontends/mcp/server_catalog.h"
#include "kforge/frontends/mcp/task_book.h"

namespace kforge::frontends::mcp::mcp_concurrency {  // named: a unity TU holds other tests' helpers
namespace {

using namespace std::chrono_literals;
using testing::RawHttpClient;
using testing::RawResponse;

constexpr int kClients = 6;
const char* kTorch =
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x): return x\n";

// Runs `body(i)` on `n` threads at once and joins them.
template <typename Body>
void at_once(int n, Body body) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&body, i] { body(i); });
  for (auto& t : threads)
    t.join();
}

class McpHttpConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto blocking = http::make_blocking_executor(pool_);
    auto catalog = build_server_catalog(jobs_, blocking, {});
    ASSERT_TRUE(catalog.is_ok()) << catalog.status().to_string();
    catalog_ = std::move(catalog).value();
    dispatcher_ = std::make_unique<Dispatcher>(*catalog_, blocking);
    http::Router router;
    ASSERT_TRUE(add_mcp_routes(router, *dispatcher_, blocking, {}).is_ok());
    http::HttpServer::Options options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.io_threads = 2;  // two io threads share the sessions, as `kforge serve` may
    harness_ = std::make_unique<testing::ServerHarness>(
        http::HttpServer::create(options, std::move(router)));
    ASSERT_TRUE(harness_->ok());
    port_ = harness_->port();
  }
  void TearDown() override {
    harness_.reset();
    pool_.join();
  }

  static std::string headers(const std::string& session) {
    std::string h =
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "MCP-Protocol-Version: 2025-11-25\r\n";
    if (!session.empty()) h += "Mcp-Session-Id: " + session + "\r\n";
    return h;
  }
  std::optional<RawResponse> post(const std::string& session, const Json& message) {
    return testing::http_call(port_, "POST", "/mcp", message.dump(), headers(session));
  }
  // A new session, initialized and established; "" when the server refused it.
  std::string open_session() {
    auto r =
        post("", jsonrpc::make_request(0, "initialize",
                                       Json{{"protocolVersion", "2025-11-25"},
                                            {"capabilities", Json::object()},
                                            {"clientInfo", {{"name", "t"}, {"version", "1"}}}}));
    if (!r || r->status != 200) return "";
    const std::string id = r->header("mcp-session-id");
    auto ack = post(id, jsonrpc::make_notification("notifications/initialized", Json::object()));
    EXPECT_TRUE(ack && ack->status == 202);
    return id;
  }
  // Reads a chunked SSE body to its end: its text, or nullopt when it did not end in time.
  static std::optional<std::string> read_stream(RawHttpClient& client) {
    std::string text;
    while (true) {
      auto chunk = client.read_chunk(10s);
      if (!chunk) return client.wait_for_close(1s) ? std::optional(text) : std::nullopt;
      if (chunk->empty()) return text;
      text += *chunk;
    }
  }

  testing::FakeJobService jobs_;
  boost::asio::thread_pool pool_{4};
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<testing::ServerHarness> harness_;
  uint16_t port_ = 0;
};

TEST_F(McpHttpConcurrencyTest, ManyClientsOpenUseAndEndSessionsWithTheirStreamsAtOnce) {
  std::atomic<int> ended_streams{0};
  at_once(kClients, [&](int) {
    for (int round = 0; round < 3; ++round) {
      const std::string id = open_session();
      ASSERT_FALSE(id.empty());
      // The session's own stream (GET), open while its requests come and go.
      RawHttpClient stream(port_);
      ASSERT_TRUE(stream.send(testing::make_request("GET", "/mcp", {}, headers(id))));
      auto head = stream.read_head();
      ASSERT_TRUE(head && head->status == 200);
      for (int k = 1; k <= 3; ++k) {
        auto listed = post(id, jsonrpc::make_request(k, "tools/list", Json::object()));
        ASSERT_TRUE(listed && listed->status == 200);
        EXPECT_NE(listed->body.find("evaluate_kernel"), std::string::npos);
        auto pong = post(id, jsonrpc::make_request(100 + k, "ping", Json::object()));
        ASSERT_TRUE(pong && pong->status == 200);
      }
      auto gone = testing::http_call(port_, "DELETE", "/mcp", {}, headers(id));
      ASSERT_TRUE(gone && gone->status == 200);
      if (read_stream(stream)) ++ended_streams;  // the DELETE ends it
      auto after = post(id, jsonrpc::make_request(9, "ping", Json::object()));
      ASSERT_TRUE(after);
      EXPECT_EQ(after->status, 404);
    }
  });
  EXPECT_EQ(ended_streams.load(), kClients * 3);
}

TEST_F(McpHttpConcurrencyTest, CancelsRaceTheJobsTheyCancelAndEveryStreamEnds) {
  std::atomic<bool> stop{false};
  // Finishes the jobs submitted, every few milliseconds, racing the clients' cancels.
  std::thread finisher([&] {
    while (!stop.load()) {
      for (const auto& job : jobs_.job_ids()) {
        if (jobs_.get(job)->state == model::JobState::kQueued) {
          jobs_.finish(job, Json{{"compiled", true}, {"correctness", true}}).ignore();
        }
      }
      std::this_thread::sleep_for(5ms);
    }
  });
  std::atomic<int> answered{0};
  std::atomic<int> cancelled{0};
  at_once(kClients, [&](int i) {
    const std::string id = open_session();
    ASSERT_FALSE(id.empty());
    for (int k = 0; k < 4; ++k) {
      RawHttpClient call(port_);
      const Json params = {{"name", "evaluate_kernel"},
                           {"arguments", {{"kernel_source", kTorch}, {"kernel_type", "torch"}}},
                           {"_meta", {{"progressToken", "p" + std::to_string(k)}}}};
      ASSERT_TRUE(call.send(testing::make_request(
          "POST", "/mcp", jsonrpc::make_request(k, "tools/call", params).dump(), headers(id))));
      auto head = call.read_head();
      ASSERT_TRUE(head && head->status == 200);
      if ((i + k) % 2 == 0) {  // half of them are cancelled as they run
        auto ack =
            post(id, jsonrpc::make_notification("notifications/cancelled", Json{{"requestId", k}}));
        ASSERT_TRUE(ack && ack->status == 202);
      }
      auto text = read_stream(call);
      ASSERT_TRUE(text.has_value()) << "the stream of request " << k << " did not end";
      if (text->find("\"result\"") != std::string::npos) {
        ++answered;
      } else {
        ++cancelled;
      }
    }
  });
  stop = true;
  finisher.join();
  RecordProperty("cancelled", cancelled.load());
  EXPECT_EQ(answered.load() + cancelled.load(), kClients * 4);
  // Every answered call ran a job; a cancel that came before its tool submitted one left none.
  EXPECT_LE(jobs_.job_ids().size(), static_cast<size_t>(kClients * 4));
  EXPECT_GE(jobs_.job_ids().size(), static_cast<size_t>(answered.load()));
  EXPECT_GE(answered.load(), kClients * 4 / 2);  // the calls nobody cancelled
  EXPECT_TRUE(jobs_.wait_for_waiters(0, 10s));
}

TEST(McpSessionStoreConcurrencyTest, SessionsComeAndGoAtTheLimitsFromManyThreads) {
  SessionStore::Options options;
  options.max_sessions = 8;
  options.max_pending_sessions = 4;
  options.max_sessions_per_client = 6;
  SessionStore store(options);
  std::atomic<int> refused{0};
  at_once(kClients, [&](int i) {
    const std::string client = "peer " + std::to_string(i % 3);
    for (int round = 0; round < 50; ++round) {
      auto created = store.create(client);
      if (!created.is_ok()) {
        ++refused;
        continue;
      }
      const std::string id = (*created)->id();
      if (round % 3 != 0) {
        auto found = store.find(id);  // established, unless a flood evicted it meanwhile
        if (found.is_ok()) {
          EXPECT_EQ((*found)->id(), id);
        }
      }
      if (round % 2 == 0) store.remove(id);
      (void)store.size();
      (void)store.pending();
    }
  });
  EXPECT_LE(store.size(), options.max_sessions + options.max_pending_sessions);
  EXPECT_LE(store.pending(), options.max_pending_sessions);
  EXPECT_GT(refused.load() + static_cast<int>(store.size()), 0);
}

TEST(McpTaskBookConcurrencyTest, TasksAreCreatedUpdatedReadAndCancelledFromManyThreads) {
  const auto dir = std::filesystem::temp_directory_path() / ("kforge-tasks-" + random_hex(8));
  auto opened = TaskBook::open(dir);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  TaskBook& book = **opened;
  std::atomic<int> started{0};
  std::atomic<int> cancels{0};
  book.set_starter("batch_compare", [&](const TaskRecord&) -> StatusOr<std::function<void()>> {
    ++started;
    return std::function<void()>([&] { ++cancels; });
  });
  std::vector<TaskRecord> tasks;
  for (int i = 0; i < kClients; ++i) {
    tasks.push_back(
        TaskRecord::fresh("batch_compare", "peer " + std::to_string(i), "", Json{{"n", i}}));
  }
  at_once(kClients, [&](int i) {
    const TaskRecord& mine = tasks[static_cast<size_t>(i)];
    ASSERT_TRUE(book.create(mine).is_ok());
    // Each thread also works on its neighbour's task, which may not exist yet.
    const TaskRecord& other = tasks[static_cast<size_t>((i + 1) % kClients)];
    for (int k = 0; k < 20; ++k) {
      EXPECT_TRUE(
          book.update(mine.id, [k](TaskRecord& t) { t.message = "step " + std::to_string(k); })
              .is_ok());
      auto got = book.get(other.id);
      ASSERT_TRUE(got.is_ok());
      if (*got) {
        EXPECT_EQ((*got)->tool, "batch_compare");
      }
      (void)book.ensure_running(mine);
    }
    EXPECT_TRUE(book.update(mine.id, [](TaskRecord& t) { t.status = "cancelled"; }).is_ok());
    EXPECT_TRUE(book.cancel(mine.id).is_ok());  // terminal: a no-op
    book.ended(mine.id);
  });
  EXPECT_EQ(started.load(), kClients);  // each started once, however often it was ensured
  for (const auto& t : tasks) {
    auto got = book.get(t.id);
    ASSERT_TRUE(got.is_ok() && *got);
    EXPECT_EQ((*got)->status, "cancelled");
  }
  (void)remove_tree(dir);
}

}  // namespace
}  // namespace kforge::frontends::mcp::mcp_concurrency
