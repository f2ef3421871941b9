#include "kforge/frontends/mcp/protocol/dispatcher.h"

#include <gtest/gtest.h>

#include <atomic>

#include "frontends/mcp/mcp_test_support.h"
#include "kforge/frontends/mcp/protocol/pagination.h"

namespace kforge::frontends::mcp {
namespace {

using testing::initialize_params;
using testing::message_of;
using testing::RecordingChannel;
using testing::rpc_request;

Json text_arg_schema() {
  return Json{{"type", "object"},
              {"properties", {{"text", {{"type", "string"}}}}},
              {"required", Json::array({"text"})},
              {"additionalProperties", false}};
}

ToolSpec simple_spec(const char* name) {
  ToolSpec s;
  s.name = name;
  s.description = std::string("test tool ") + name;
  s.input_schema = Json{{"type", "object"}};
  return s;
}

class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ToolSpec echo = simple_spec("echo");
    echo.input_schema = text_arg_schema();
    echo.output_schema = Json{{"type", "object"}};
    ASSERT_TRUE(catalog_.tools
                    .add(echo,
                         [](std::shared_ptr<ToolCall> call) {
                           Json text = call->arguments()["text"];
                           call->finish(ToolResult::structured_value(Json{{"echo", text}}, "echo"));
                         })
                    .is_ok());
    ASSERT_TRUE(catalog_.tools
                    .add(simple_spec("slow"),
                         [this](std::shared_ptr<ToolCall> call) {
                           call->context().on_cancel([this] { cancel_hooks_++; });
                           started_ = true;  // never finishes by itself
                         })
                    .is_ok());
    ASSERT_TRUE(catalog_.tools
                    .add(simple_spec("progress"),
                         [](std::shared_ptr<ToolCall> call) {
                           RequestContext& ctx = call->context();
                           for (double p : {0.0, 0.0, 50.0, 40.0, 100.0}) {
                             ctx.report_progress(p, 100.0, "step");
                           }
                           call->finish(ToolResult::text("done"));
                           ctx.report_progress(101.0, 100.0, "after the response");
                         })
                    .is_ok());
    ASSERT_TRUE(catalog_.tools
                    .add(simple_spec("log"),
                         [](std::shared_ptr<ToolCall> call) {
                           call->context().log(LogLevel::kDebug, "t", "debug");
                           call->context().log(LogLevel::kWarning, "t", "warning");
                           call->finish(ToolResult::text("logged"));
                         })
                    .is_ok());
    ASSERT_TRUE(catalog_.tools
                    .add(simple_spec("ask"),
                         [](std::shared_ptr<ToolCall> call) {
                           call->context().request_client(
                               "sampling/createMessage", Json{{"maxTokens", 1}},
                               [call](StatusOr<Json> r) {
                                 call->finish(r.is_ok() ? ToolResult::text(r->dump())
                                                        : ToolResult::error(r.status().message()));
                               });
                         })
                    .is_ok());
    ASSERT_TRUE(catalog_.tools
                    .add(simple_spec("throws"),
                         [](std::shared_ptr<ToolCall>) { throw std::runtime_error("boom"); })
                    .is_ok());
    dispatcher_ = std::make_unique<Dispatcher>(catalog_, threads_.executor(), DispatchOptions{2});
  }

  // Sends a request and returns its response (or nullopt).
  std::optional<Json> ask(const Json& id, const std::string& method, Json params = nullptr,
                          std::shared_ptr<RecordingChannel> channel = nullptr) {
    if (!channel) channel = std::make_shared<RecordingChannel>();
    dispatcher_->handle(session_, message_of(rpc_request(id, method, std::move(params))), channel);
    return channel->response();
  }

  void initialize(const std::string& version = "2025-11-25", Json caps = Json::object()) {
    auto r = ask(0, "initialize", initialize_params(version, std::move(caps)));
    ASSERT_TRUE(r && r->contains("result")) << (r ? r->dump() : "no response");
  }

  Catalog catalog_;
  testing::ThreadExecutor threads_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::shared_ptr<Session> session_ = std::make_shared<Session>("s1");
  std::atomic<int> cancel_hooks_{0};
  std::atomic<bool> started_{false};
};

TEST_F(DispatcherTest, OnlyInitializeAndPingBeforeInitialize) {
  auto early = ask(1, "tools/list");
  ASSERT_TRUE(early);
  EXPECT_EQ((*early)["error"]["code"], jsonrpc::kInvalidRequest);
  EXPECT_EQ((*ask(2, "ping"))["result"], Json::object());
  auto init = ask(3, "initialize", initialize_params("2025-06-18"));
  ASSERT_TRUE(init);
  const Json& result = (*init)["result"];
  EXPECT_EQ(result["protocolVersion"], "2025-06-18");
  EXPECT_EQ(result["capabilities"], (Json{{"tools", Json::object()}, {"logging", Json::object()}}));
  EXPECT_EQ(result["serverInfo"]["name"], "kforge");
  EXPECT_EQ((*ask(4, "initialize", initialize_params()))["error"]["code"],
            jsonrpc::kInvalidRequest);
  EXPECT_EQ(session_->protocol_version(), "2025-06-18");
}

TEST_F(DispatcherTest, VersionNegotiationNeverFails) {
  auto r = ask(1, "initialize", initialize_params("1999-01-01"));
  EXPECT_EQ((*r)["result"]["protocolVersion"], std::string(kLatestProtocolVersion));
  auto bad = std::make_shared<Session>("s2");
  auto channel = std::make_shared<RecordingChannel>();
  dispatcher_->handle(bad, message_of(rpc_request(1, "initialize", Json{{"capabilities", {}}})),
                      channel);
  EXPECT_EQ((*channel->response())["error"]["code"], jsonrpc::kInvalidParams);
  EXPECT_FALSE(bad->protocol_version());
}

TEST_F(DispatcherTest, ToolsListPaginatesWithoutATrailingCursor) {
  initialize();
  std::vector<std::string> names;
  Json params = Json::object();
  int pages = 0;
  while (true) {
    auto page = ask(10 + pages, "tools/list", params);
    ASSERT_TRUE(page && page->contains("result")) << page->dump();
    const Json& result = (*page)["result"];
    ++pages;
    for (const auto& t : result["tools"])
      names.push_back(t["name"]);
    if (!result.contains("nextCursor")) break;
    ASSERT_TRUE(result["nextCursor"].is_string() &&
                !result["nextCursor"].get<std::string>().empty());
    params = Json{{"cursor", result["nextCursor"]}};
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names, (std::vector<std::string>{"echo", "slow", "progress", "log", "ask", "throws"}));
  auto bad = ask(20, "tools/list", Json{{"cursor", "garbage"}});
  EXPECT_EQ((*bad)["error"]["code"], jsonrpc::kInvalidParams);
  auto foreign = ask(21, "tools/list", Json{{"cursor", encode_cursor("prompts", 2)}});
  EXPECT_EQ((*foreign)["error"]["code"], jsonrpc::kInvalidParams);
}

TEST_F(DispatcherTest, ToolCallsValidateArgumentsAndStructureResults) {
  initialize();
  auto ok = ask(1, "tools/call", Json{{"name", "echo"}, {"arguments", {{"text", "hi"}}}});
  ASSERT_TRUE(ok);
  EXPECT_EQ((*ok)["result"]["structuredContent"], (Json{{"echo", "hi"}}));
  EXPECT_EQ((*ok)["result"]["content"][0]["text"], "echo");
  EXPECT_EQ((*ok)["result"]["content"][1]["text"], R"({"echo":"hi"})");
  EXPECT_FALSE((*ok)["result"].contains("isError"));

  auto invalid = ask(2, "tools/call", Json{{"name", "echo"}, {"arguments", {{"text", 3}}}});
  EXPECT_EQ((*invalid)["result"]["isError"], true);
  EXPECT_EQ((*invalid)["result"]["content"][0]["text"],
            "Invalid arguments for echo: text: must be a string, got integer");
  auto missing = ask(3, "tools/call", Json{{"name", "echo"}});
  EXPECT_EQ((*missing)["result"]["content"][0]["text"],
            "Invalid arguments for echo: text: is required");

  EXPECT_EQ((*ask(4, "tools/call", Json{{"name", "nope"}}))["error"]["code"],
            jsonrpc::kInvalidParams);
  EXPECT_EQ((*ask(5, "tools/call", Json::object()))["error"]["code"], jsonrpc::kInvalidParams);
  EXPECT_EQ((*ask(6, "tools/call", Json{{"name", "echo"}, {"arguments", "x"}}))["error"]["code"],
            jsonrpc::kInvalidParams);
  auto threw = ask(7, "tools/call", Json{{"name", "throws"}});
  EXPECT_EQ((*threw)["result"]["isError"], true);
  EXPECT_EQ((*ask(8, "resources/list"))["error"]["code"], jsonrpc::kMethodNotFound);
  EXPECT_EQ((*ask(9, "no/such/method"))["error"]["code"], jsonrpc::kMethodNotFound);
}

TEST_F(DispatcherTest, OldProtocolGetsNoStructuredContent) {
  initialize("2025-03-26");
  auto ok = ask(1, "tools/call", Json{{"name", "echo"}, {"arguments", {{"text", "hi"}}}});
  EXPECT_FALSE((*ok)["result"].contains("structuredContent"));
  auto list = ask(2, "tools/list");
  EXPECT_FALSE((*list)["result"]["tools"][0].contains("outputSchema"));
}

TEST_F(DispatcherTest, ProgressIsStrictlyIncreasingAndStopsAtTheResponse) {
  initialize();
  auto channel = std::make_shared<RecordingChannel>();
  Json params = {{"name", "progress"}, {"_meta", {{"progressToken", "tok"}}}};
  ASSERT_TRUE(ask(1, "tools/call", params, channel));
  std::vector<double> values;
  for (const Json& m : channel->related()) {
    EXPECT_EQ(m["method"], "notifications/progress");
    EXPECT_EQ(m["params"]["progressToken"], "tok");
    values.push_back(m["params"]["progress"]);
  }
  EXPECT_EQ(values, (std::vector<double>{0, 50, 100}));
  auto no_token = std::make_shared<RecordingChannel>();
  ASSERT_TRUE(ask(2, "tools/call", Json{{"name", "progress"}}, no_token));
  EXPECT_TRUE(no_token->related().empty());
  EXPECT_TRUE(dispatcher_->prefers_stream(message_of(rpc_request(3, "tools/call", params))));
  EXPECT_FALSE(dispatcher_->prefers_stream(message_of(rpc_request(3, "tools/list"))));
}

TEST_F(DispatcherTest, LoggingHonoursTheLevel) {
  initialize();
  auto quiet = std::make_shared<RecordingChannel>();
  ask(1, "tools/call", Json{{"name", "log"}}, quiet);
  ASSERT_EQ(quiet->related().size(), 1u);  // warning passes the default level, debug does not
  EXPECT_EQ(quiet->related()[0]["params"]["level"], "warning");
  EXPECT_EQ((*ask(2, "logging/setLevel", Json{{"level", "debug"}}))["result"], Json::object());
  auto loud = std::make_shared<RecordingChannel>();
  ask(3, "tools/call", Json{{"name", "log"}}, loud);
  EXPECT_EQ(loud->related().size(), 2u);
  EXPECT_EQ((*ask(4, "logging/setLevel", Json{{"level", "verbose"}}))["error"]["code"],
            jsonrpc::kInvalidParams);
}

TEST_F(DispatcherTest, CancelledRequestsRunTheirHooksAndGetNoResponse) {
  initialize();
  auto channel = std::make_shared<RecordingChannel>();
  dispatcher_->handle(session_, message_of(rpc_request(42, "tools/call", Json{{"name", "slow"}})),
                      channel);
  for (int i = 0; i < 500 && !started_; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(started_);
  EXPECT_EQ(session_->requests_in_flight(), 1u);
  // A duplicate id in flight is refused.
  auto dup = ask(42, "ping");
  EXPECT_EQ((*dup)["error"]["code"], jsonrpc::kInvalidRequest);
  dispatcher_->handle(
      session_,
      message_of(jsonrpc::make_notification("notifications/cancelled", Json{{"requestId", 42}})),
      nullptr);
  EXPECT_TRUE(channel->wait_abandoned());
  EXPECT_EQ(cancel_hooks_, 1);
  EXPECT_EQ(channel->response_count(), 0);
  EXPECT_EQ(session_->requests_in_flight(), 0u);
  // Unknown and repeated cancels are ignored.
  dispatcher_->handle(
      session_,
      message_of(jsonrpc::make_notification("notifications/cancelled", Json{{"requestId", 42}})),
      nullptr);
  EXPECT_EQ(cancel_hooks_, 1);
}

TEST_F(DispatcherTest, ServerToClientRequestsAwaitTheClientsResponse) {
  initialize("2025-11-25", Json{{"sampling", Json::object()}});
  auto channel = std::make_shared<RecordingChannel>();
  dispatcher_->handle(session_, message_of(rpc_request(5, "tools/call", Json{{"name", "ask"}})),
                      channel);
  auto related = channel->related(1);
  ASSERT_EQ(related.size(), 1u);
  EXPECT_EQ(related[0]["method"], "sampling/createMessage");
  EXPECT_FALSE(channel->response(std::chrono::milliseconds(50)));
  dispatcher_->handle(session_, message_of(jsonrpc::make_result(related[0]["id"], {{"ok", 1}})),
                      nullptr);
  auto r = channel->response();
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["result"]["content"][0]["text"], R"({"ok":1})");

  auto second = std::make_shared<RecordingChannel>();
  dispatcher_->handle(session_, message_of(rpc_request(6, "tools/call", Json{{"name", "ask"}})),
                      second);
  Json id = second->related(1)[0]["id"];
  dispatcher_->handle(session_, message_of(jsonrpc::make_error(id, -1, "user declined")), nullptr);
  EXPECT_EQ((*second->response())["result"]["isError"], true);

  // Closing the session fails what is still awaited.
  auto third = std::make_shared<RecordingChannel>();
  dispatcher_->handle(session_, message_of(rpc_request(7, "tools/call", Json{{"name", "ask"}})),
                      third);
  third->related(1);
  session_->close();
  EXPECT_EQ((*third->response())["result"]["isError"], true);
}

}  // namespace
}  // namespace kforge::frontends::mcp
