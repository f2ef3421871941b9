// The HTTP server's defences (issue #8): request framing (RFC 9112 §6.1), the connection
// cap and who it evicts, header/body/idle timeouts, and the client identity handlers see.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "frontends/http/raw_http_client.h"
#include "frontends/http/server_harness.h"
#include "kforge/frontends/http/http_reader.h"
#include "kforge/frontends/http/http_server.h"

namespace kforge::frontends::http {
namespace {

using kforge::testing::http_call;
using kforge::testing::make_request;
using kforge::testing::RawHttpClient;
using kforge::testing::Recorder;
using kforge::testing::ServerHarness;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

class LimitsTest : public ::testing::Test {
 protected:
  ~LimitsTest() override {
    harness_.reset();
    std::lock_guard lock(mu_);
    held_.clear();
  }

  static HttpServer::Options options() {
    HttpServer::Options o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.max_body_bytes = 1024;
    o.drain_timeout = std::chrono::seconds(2);
    return o;
  }

  void start(HttpServer::Options o = options()) {
    Router r;
    ASSERT_TRUE(r.add("POST", "/echo", [](HttpRequest req, Responder res) {
                   res.send(HttpResponse::json(200, Json{{"body", req.body}}));
                 }).is_ok());
    ASSERT_TRUE(r.add("GET", "/whoami", [](HttpRequest req, Responder res) {
                   res.send(HttpResponse::json(200, Json{{"client", req.client}}));
                 }).is_ok());
    // Never answers (until the test ends); counts its calls.
    ASSERT_TRUE(r.add("GET", "/hold", [this](HttpRequest, Responder res) {
                   std::lock_guard lock(mu_);
                   held_.push_back(std::move(res));
                   holds_.add(1);
                 }).is_ok());
    harness_ = std::make_unique<ServerHarness>(HttpServer::create(o, std::move(r)));
    ASSERT_TRUE(harness_->ok());
    port_ = harness_->port();
  }

  std::mutex mu_;
  std::vector<Responder> held_;
  Recorder<int> holds_;
  std::unique_ptr<ServerHarness> harness_;
  uint16_t port_ = 0;
};

// ---- framing (RFC 9112 §6.1) ----

TEST_F(LimitsTest, TransferEncodingOtherThanExactlyChunkedIs400) {
  start();
  const std::vector<std::string> heads = {
      // The issue's case: a coding that is not chunked, with a Content-Length.
      "Transfer-Encoding: xchunked\r\nContent-Length: 5\r\n",
      // The same in the other order (Beast refused this one already).
      "Content-Length: 5\r\nTransfer-Encoding: xchunked\r\n",
      // chunked together with Content-Length.
      "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
      // Codings we do not decode, chunked last or alone.
      "Transfer-Encoding: gzip, chunked\r\n",
      "Transfer-Encoding: gzip\r\n",
      // Two Transfer-Encoding headers.
      "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
  };
  for (const std::string& head : heads) {
    RawHttpClient client(port_);
    ASSERT_TRUE(client.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\n" + head +
                            "\r\n5\r\nhello\r\n0\r\n\r\n"));
    auto r = client.read_response(milliseconds(3000));
    ASSERT_TRUE(r) << head;
    EXPECT_EQ(r->status, 400) << head;
    // Beast refuses some orders itself ("bad Transfer-Encoding"); http_reader the rest.
    EXPECT_NE(r->body.find("malformed HTTP request"), std::string::npos) << r->body;
    EXPECT_TRUE(client.wait_for_close()) << head;
  }
  // The issue's case is refused by the framing check, which says why.
  RawHttpClient issue(port_);
  ASSERT_TRUE(issue.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\n" + heads[0] + "\r\nhello"));
  auto refused = issue.read_response(milliseconds(3000));
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->body.find("RFC 9112"), std::string::npos) << refused->body;
  // Exactly "chunked" (any case, surrounding spaces) is fine.
  RawHttpClient client(port_);
  ASSERT_TRUE(
      client.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding:  Chunked \r\n"
                  "\r\n5\r\nhello\r\n0\r\n\r\n"));
  auto ok = client.read_response();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(Json::parse(ok->body)["body"], "hello");
}

TEST(HttpReaderTest, ReadsWhatTheServerReads) {
  ReaderLimits limits{1024, 16};
  ReadOutcome ok = read_request(
      "POST /e?x=1 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
      limits);
  ASSERT_TRUE(ok.request);
  EXPECT_EQ(ok.request->body, "abc");
  EXPECT_EQ(*ok.request->query_param("x"), "1");
  EXPECT_EQ(read_request("POST / HTTP/1.1\r\nContent-Length: 17\r\n\r\n", limits).refusal->status,
            413);
  ReadOutcome big_chunks =
      read_request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n" +
                       std::string(32, 'x') + "\r\n0\r\n\r\n",
                   limits);
  ASSERT_TRUE(big_chunks.refusal);
  EXPECT_EQ(big_chunks.refusal->status, 413);
  ReadOutcome smuggled = read_request(
      "POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\nContent-Length: 3\r\n\r\nabc", limits);
  ASSERT_TRUE(smuggled.refusal);
  EXPECT_EQ(smuggled.refusal->status, 400);
  ReadOutcome partial = read_request("GET / HTTP/1.1\r\nHost:", limits);
  EXPECT_FALSE(partial.request || partial.refusal);
  EXPECT_EQ(read_request("GET / HTTP/1.1\r\n" + std::string(2000, 'a') + "\r\n\r\n", limits)
                .refusal->status,
            431);
}

// ---- the connection cap ----

TEST_F(LimitsTest, AtTheCapTheLongestIdleConnectionMakesRoom) {
  HttpServer::Options o = options();
  o.max_connections = 4;
  start(o);
  std::vector<std::unique_ptr<RawHttpClient>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<RawHttpClient>(port_));
    std::this_thread::sleep_for(milliseconds(20));  // so that idle[0] is the oldest
  }
  // A fifth client is served; the oldest idle connection was closed for it.
  auto r = http_call(port_, "GET", "/whoami");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(idle[0]->wait_for_close(milliseconds(3000)));
  // A flood of idle connections (1,100 in the issue) never locks a new client out.
  std::vector<std::unique_ptr<RawHttpClient>> flood;
  for (int i = 0; i < 40; ++i)
    flood.push_back(std::make_unique<RawHttpClient>(port_));
  r = http_call(port_, "GET", "/whoami");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(LimitsTest, AtTheCapWithEveryConnectionBusyANewOneGets503) {
  HttpServer::Options o = options();
  o.max_connections = 3;
  start(o);
  std::vector<std::unique_ptr<RawHttpClient>> busy;
  for (int i = 0; i < 3; ++i) {
    busy.push_back(std::make_unique<RawHttpClient>(port_));
    ASSERT_TRUE(busy.back()->send(make_request("GET", "/hold")));
  }
  ASSERT_TRUE(holds_.wait_for(3));
  RawHttpClient extra(port_);
  auto r = extra.read_response(milliseconds(3000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->header("retry-after"), "1");
  EXPECT_EQ(Json::parse(r->body)["code"], "unavailable");
  EXPECT_NE(r->body.find("--max-connections"), std::string::npos);
  // Busy connections were not touched.
  for (auto& c : busy)
    EXPECT_FALSE(c->wait_for_close(milliseconds(50)));
}

// ---- timeouts ----

TEST_F(LimitsTest, AHeaderDribblerIsCutAtTheHeaderTimeoutNotTheIdleTimeout) {
  HttpServer::Options o = options();
  o.idle_timeout = std::chrono::seconds(30);
  o.header_timeout = milliseconds(400);
  start(o);
  RawHttpClient client(port_);
  const auto t0 = steady_clock::now();
  ASSERT_TRUE(client.send("GET /whoami HTTP/1.1\r\n"));
  // One header byte every 50 ms: never idle, never done.
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    closed = !client.send("X") || client.wait_for_close(milliseconds(50));
  }
  const auto elapsed = steady_clock::now() - t0;
  EXPECT_TRUE(closed);
  EXPECT_GE(elapsed, milliseconds(350));
  EXPECT_LT(elapsed, milliseconds(3000));
}

TEST_F(LimitsTest, AnIdleConnectionLivesUntilTheIdleTimeout) {
  HttpServer::Options o = options();
  o.idle_timeout = milliseconds(300);
  o.header_timeout = std::chrono::seconds(30);
  start(o);
  RawHttpClient client(port_);
  const auto t0 = steady_clock::now();
  EXPECT_TRUE(client.wait_for_close(milliseconds(5000)));
  EXPECT_GE(steady_clock::now() - t0, milliseconds(250));
}

TEST_F(LimitsTest, ASlowBodyIsCutAtTheBodyTimeout) {
  HttpServer::Options o = options();
  o.body_timeout = milliseconds(300);
  start(o);
  RawHttpClient client(port_);
  const auto t0 = steady_clock::now();
  ASSERT_TRUE(
      client.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n"
                  "only ten b"));
  EXPECT_TRUE(client.wait_for_close(milliseconds(5000)));
  EXPECT_LT(steady_clock::now() - t0, milliseconds(3000));
}

// ---- identity ----

TEST_F(LimitsTest, HandlersSeeTheClientIdentity) {
  start();
  auto r = http_call(port_, "GET", "/whoami");
  ASSERT_TRUE(r);
  EXPECT_EQ(Json::parse(r->body)["client"], "peer 127.0.0.1");
  harness_.reset();
  HttpServer::Options o = options();
  o.token = "s3cret";
  start(o);
  r = http_call(port_, "GET", "/whoami", "", "Authorization: Bearer s3cret\r\n");
  ASSERT_TRUE(r);
  const std::string client = Json::parse(r->body)["client"];
  EXPECT_EQ(client.rfind("token ", 0), 0u) << client;
  EXPECT_EQ(client.find("s3cret"), std::string::npos) << client;
  EXPECT_EQ(client.substr(client.size() - 14), "peer 127.0.0.1") << client;
}

}  // namespace
}  // namespace kforge::frontends::http
