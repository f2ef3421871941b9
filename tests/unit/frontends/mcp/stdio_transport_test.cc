#include "kforge/frontends/mcp/stdio_transport.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "frontends/mcp/mcp_test_support.h"

namespace kforge::frontends::mcp {
namespace {

// Runs a StdioTransport over two pipes: the test writes requests and reads lines.
class StdioHarness {
 public:
  explicit StdioHarness(const Dispatcher& dispatcher, size_t max_bytes = 1 << 20) {
    EXPECT_EQ(pipe(in_), 0);
    EXPECT_EQ(pipe(out_), 0);
    transport_ = std::make_unique<StdioTransport>(dispatcher, in_[0], out_[1],
                                                  StdioTransport::Options{max_bytes});
    runner_ = std::thread([this] { status_ = transport_->run(); });
  }
  ~StdioHarness() {
    close_input();
    if (runner_.joinable()) runner_.join();
    for (int fd : {in_[0], out_[0], out_[1]})
      close(fd);
  }
  void write_text(const std::string& text) {
    ASSERT_EQ(write(in_[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  // The next line the transport wrote, parsed.
  Json read_message() {
    std::string line;
    char c = 0;
    while (read(out_[0], &c, 1) == 1 && c != '\n')
      line += c;
    return Json::parse(line);
  }
  void close_input() {
    if (in_[1] >= 0) close(in_[1]);
    in_[1] = -1;
  }
  void join() { runner_.join(); }
  StdioTransport& transport() { return *transport_; }
  const Status& status() const { return status_; }

 private:
  int in_[2] = {-1, -1};
  int out_[2] = {-1, -1};
  std::unique_ptr<StdioTransport> transport_;
  std::thread runner_;
  Status status_;
};

class StdioTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ToolSpec echo;
    echo.name = "echo";
    echo.description = "echo";
    echo.input_schema = Json{{"type", "object"}};
    ASSERT_TRUE(catalog_.tools
                    .add(echo,
                         [](std::shared_ptr<ToolCall> call) {
                           call->finish(ToolResult::text(call->arguments().dump()));
                         })
                    .is_ok());
    dispatcher_ = std::make_unique<Dispatcher>(catalog_, threads_.executor());
  }
  Catalog catalog_;
  testing::ThreadExecutor threads_;
  std::unique_ptr<Dispatcher> dispatcher_;
};

TEST_F(StdioTransportTest, OneMessagePerLineAndErrorsForBadLines) {
  StdioHarness io(*dispatcher_, 4096);
  io.write_text(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":)" +
                testing::initialize_params().dump() + "}\r\n\n");
  EXPECT_EQ(io.read_message()["result"]["protocolVersion"], "2025-11-25");
  io.write_text("{not json\n");
  Json parse_error = io.read_message();
  EXPECT_EQ(parse_error["error"]["code"], jsonrpc::kParseError);
  EXPECT_TRUE(parse_error["id"].is_null());
  io.write_text(R"({"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":")" +
                std::string(5000, 'x') + "\"}}\n");
  EXPECT_EQ(io.read_message()["error"]["code"], jsonrpc::kInvalidRequest);
  io.write_text(R"({"id":3,"method":"ping"})"
                "\n");
  Json invalid = io.read_message();
  EXPECT_EQ(invalid["error"]["code"], jsonrpc::kInvalidRequest);
  EXPECT_EQ(invalid["id"], 3);
  // A message split across writes, with a text argument holding a newline escape.
  io.write_text(R"({"jsonrpc":"2.0","id":4,"method":"tools/call",)");
  io.write_text(R"("params":{"name":"echo","arguments":{"t":"a\nb"}}})"
                "\n");
  Json echo = io.read_message();
  EXPECT_EQ(echo["id"], 4);
  EXPECT_EQ(echo["result"]["content"][0]["text"], R"({"t":"a\nb"})");
  io.close_input();
  io.join();
  EXPECT_TRUE(io.status().is_ok());
}

// Issue #8 item 5: ~100k levels of nesting (about 200 KB) crashed the process in a recursive
// copy. Now the parser refuses them (-32700) and the session goes on.
TEST_F(StdioTransportTest, DeeplyNestedJsonIsAParseErrorNotACrash) {
  StdioHarness io(*dispatcher_, 1 << 20);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  io.write_text(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":)" + deep + "}}\n");
  Json error = io.read_message();
  EXPECT_EQ(error["error"]["code"], jsonrpc::kParseError);
  EXPECT_NE(error["error"]["message"].get<std::string>().find("nested deeper"), std::string::npos);
  io.write_text(deep + "\n");
  EXPECT_EQ(io.read_message()["error"]["code"], jsonrpc::kParseError);
  io.write_text(R"({"jsonrpc":"2.0","id":2,"method":"ping"})"
                "\n");
  EXPECT_EQ(io.read_message()["id"], 2);
  io.close_input();
  io.join();
  EXPECT_TRUE(io.status().is_ok());
}

TEST_F(StdioTransportTest, StopEndsRunWhileInputIsOpen) {
  StdioHarness io(*dispatcher_);
  io.transport().stop();
  io.join();
  EXPECT_TRUE(io.status().is_ok());
}

// A server that cannot serve answers each request (a batch's too) with the reason, ignores
// notifications, responses and lines that are not JSON, and returns at end of input.
TEST(AnswerRequestsWithError, EveryRequestGetsTheReason) {
  int in[2];
  int out[2];
  ASSERT_EQ(pipe(in), 0);
  ASSERT_EQ(pipe(out), 0);
  const std::string text =
      R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})"
      "\n"
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
      "\n"
      "not json\n"
      R"([{"jsonrpc":"2.0","id":"a","method":"tools/list"},{"jsonrpc":"2.0","id":1,"result":{}}])"
      "\n"
      R"({"jsonrpc":"2.0","id":7,"method":"tools/call"})";  // the last line has no newline
  ASSERT_EQ(write(in[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(in[1]);
  ASSERT_TRUE(
      answer_requests_with_error(in[0], out[1], "kforge mcp cannot start: no disk").is_ok());
  close(out[1]);
  std::string output;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;)
    output.append(buf, static_cast<size_t>(n));
  close(in[0]);
  close(out[0]);
  std::vector<Json> answers;
  for (size_t start = 0, nl; (nl = output.find('\n', start)) != std::string::npos; start = nl + 1)
    answers.push_back(Json::parse(output.substr(start, nl - start)));
  ASSERT_EQ(answers.size(), 3u) << output;
  EXPECT_EQ(answers[0]["id"], 0);
  EXPECT_EQ(answers[1]["id"], "a");
  EXPECT_EQ(answers[2]["id"], 7);
  for (const Json& a : answers) {
    EXPECT_EQ(a["error"]["code"], -32603);
    EXPECT_EQ(a["error"]["message"], "kforge mcp cannot start: no disk");
  }
}

}  // namespace
}  // namespace kforge::frontends::mcp
