// The Beast session over real sockets, with test routes (no JobService): HTTP parsing and
// limits, 100-continue, keep-alive, auth, the bind policy, streaming, cancellation, drain.
#include "kforge/frontends/http/http_server.h"

#include <gtest/gtest.h>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "frontends/http/raw_http_client.h"
#include "frontends/http/server_harness.h"

namespace kforge::frontends::http {
namespace {

using kforge::testing::http_call;
using kforge::testing::make_request;
using kforge::testing::RawHttpClient;
using kforge::testing::Recorder;
using kforge::testing::ServerHarness;
using std::chrono::milliseconds;

// Test routes and what they observed.
class TestRoutes {
 public:
  TestRoutes() : pool_(4) {}
  ~TestRoutes() {
    std::lock_guard lock(mu_);
    held_.clear();
  }

  Router router() {
    Router r;
    add(r, "POST", "/echo", [](HttpRequest req, Responder res) {
      Json query = Json::object();
      for (const auto& [k, v] : req.query)
        query[k] = v;
      res.send(HttpResponse::json(200, Json{{"body", req.body}, {"query", query}}));
    });
    add(r, "GET", "/hello", [](HttpRequest, Responder res) {
      res.send(HttpResponse::json(200, Json{{"hello", "world"}}));
    });
    // Answers from another thread after ?ms=.
    add(r, "GET", "/slow", [this](HttpRequest req, Responder res) {
      int ms = std::stoi(*req.query_param("ms"));
      slow_started_.add(ms);
      boost::asio::post(pool_, [res, ms] {
        std::this_thread::sleep_for(milliseconds(ms));
        res.send(HttpResponse::json(200, Json{{"slept_ms", ms}}));
      });
    });
    // Never answers by itself; records cancellations. With ?answer_on_stop=1 it answers 503
    // when the server stops.
    add(r, "GET", "/hold", [this](HttpRequest req, Responder res) {
      bool answer_on_stop = req.query_param("answer_on_stop") != nullptr;
      res.on_cancel([this, answer_on_stop](CancelReason reason, const Responder& r2) {
        cancels_.add(reason);
        if (answer_on_stop && reason == CancelReason::kServerStopping) {
          r2.send(HttpResponse::error(unavailable("stopping")));
        }
      });
      std::lock_guard lock(mu_);
      held_.push_back(res);
      holds_.add(1);
    });
    add(r, "GET", "/forget", [](HttpRequest, Responder) {});
    // Answers from its deadline callback. The handler keeps its Responder (held_): the
    // callbacks alone do not keep an exchange answerable.
    add(r, "GET", "/deadline", [this](HttpRequest, Responder res) {
      res.on_deadline(milliseconds(50), [](const Responder& r2) {
        r2.send(HttpResponse::json(202, Json{{"deadline", true}}));
      });
      std::lock_guard lock(mu_);
      held_.push_back(res);
    });
    // ?n= events, ?gap_ms= apart, then close; keep-alive comments every 20 ms.
    add(r, "GET", "/stream", [this](HttpRequest req, Responder res) {
      int n = std::stoi(*req.query_param("n"));
      int gap = std::stoi(*req.query_param("gap_ms"));
      StreamHead head;
      head.keepalive_interval = milliseconds(20);
      EventStream stream = res.start_stream(head);
      boost::asio::post(pool_, [stream, n, gap] {
        for (int i = 0; i < n; ++i) {
          if (gap > 0) std::this_thread::sleep_for(milliseconds(gap));
          stream.send_event(SseEvent::of("event " + std::to_string(i), "", std::to_string(i)));
        }
        stream.close();
      });
    });
    // A stream that never ends; records cancellations.
    add(r, "GET", "/stream-forever", [this](HttpRequest, Responder res) {
      res.on_cancel([this](CancelReason reason, const Responder&) { cancels_.add(reason); });
      EventStream stream = res.start_stream(StreamHead{});
      stream.send_event(SseEvent::of("first"));
      std::lock_guard lock(mu_);
      streams_.push_back(stream);
      holds_.add(1);
    });
    return r;
  }

  Recorder<CancelReason> cancels_;
  Recorder<int> holds_;
  Recorder<int> slow_started_;

 private:
  void add(Router& r, const char* method, const char* path, Handler h) {
    ASSERT_TRUE(r.add(method, path, std::move(h)).is_ok());
  }

  boost::asio::thread_pool pool_;
  std::mutex mu_;
  std::vector<Responder> held_;
  std::vector<EventStream> streams_;
};

HttpServer::Options local_options() {
  HttpServer::Options o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.max_body_bytes = 1024;
  o.drain_timeout = std::chrono::seconds(5);
  return o;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpServer::Options options = local_options()) {
    harness_ = std::make_unique<ServerHarness>(HttpServer::create(options, routes_.router()));
    ASSERT_TRUE(harness_->ok());
    port_ = harness_->port();
  }
  void TearDown() override { harness_.reset(); }

  TestRoutes routes_;
  std::unique_ptr<ServerHarness> harness_;
  uint16_t port_ = 0;
};

TEST_F(HttpServerTest, UnknownPathIs404AndWrongMethodIs405WithAllow) {
  start();
  auto r = http_call(port_, "GET", "/nowhere");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->header("content-type"), "application/json");
  EXPECT_EQ(Json::parse(r->body)["code"], "not_found");
  r = http_call(port_, "DELETE", "/echo");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->header("allow"), "POST");
}

TEST_F(HttpServerTest, MalformedHttpIs400AndClosesTheConnection) {
  start();
  for (const char* garbage :
       {"THIS IS NOT HTTP\r\n\r\n", "GET /hello HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        "GET /hello HTTP/1.1\r\nBad Header\r\n\r\n",
        "POST /echo HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"}) {
    RawHttpClient client(port_);
    ASSERT_TRUE(client.send(garbage));
    auto r = client.read_response();
    ASSERT_TRUE(r) << garbage;
    EXPECT_EQ(r->status, 400) << garbage;
    EXPECT_EQ(Json::parse(r->body)["code"], "invalid_argument");
    EXPECT_TRUE(client.wait_for_close()) << garbage;
  }
}

TEST_F(HttpServerTest, OversizedHeaderIs431) {
  start();
  auto r = http_call(port_, "GET", "/hello", "", "X-Big: " + std::string(100 * 1024, 'a') + "\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
}

TEST_F(HttpServerTest, ContentLengthOverTheLimitIs413BeforeTheBodyIsSent) {
  start();
  RawHttpClient client(port_);
  // Only the head: the server must answer without waiting for 100000 bytes.
  ASSERT_TRUE(
      client.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n"));
  auto r = client.read_response(milliseconds(3000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(Json::parse(r->body)["code"], "payload_too_large");
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(client.wait_for_close());
}

TEST_F(HttpServerTest, ChunkedBodyOverTheLimitIs413) {
  start();
  RawHttpClient client(port_);
  std::string request =
      "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4; ++i)
    request += "200\r\n" + std::string(0x200, 'x') + "\r\n";  // 2048 B
  request += "0\r\n\r\n";
  ASSERT_TRUE(client.send(request));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
}

TEST_F(HttpServerTest, ChunkedBodyWithinTheLimitIsAccepted) {
  start();
  RawHttpClient client(port_);
  ASSERT_TRUE(
      client.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
                  "\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body)["body"], "hello world");
}

TEST_F(HttpServerTest, ExpectContinueIsAnswered) {
  start();
  RawHttpClient client(port_);
  ASSERT_TRUE(
      client.send("POST /echo?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n"
                  "Expect: 100-continue\r\n\r\n"));
  auto interim = client.read_head(milliseconds(3000));
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(client.send("hello"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  Json body = Json::parse(r->body);
  EXPECT_EQ(body["body"], "hello");
  EXPECT_EQ(body["query"]["x"], "1");
}

TEST_F(HttpServerTest, ExpectContinueWithATooLargeBodyGets413Instead) {
  start();
  RawHttpClient client(port_);
  ASSERT_TRUE(
      client.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000\r\n"
                  "Expect: 100-continue\r\n\r\n"));
  auto r = client.read_response(milliseconds(3000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
}

TEST_F(HttpServerTest, KeepAliveAndPipelining) {
  start();
  RawHttpClient client(port_);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.send(make_request("GET", "/hello")));
    auto r = client.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_NE(r->header("connection"), "close");
  }
  // Two requests in one write (the second arrives while the first is handled).
  ASSERT_TRUE(
      client.send(make_request("GET", "/slow?ms=50") + make_request("POST", "/echo", "2nd")));
  auto first = client.read_response();
  auto second = client.read_response();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(Json::parse(first->body)["slept_ms"], 50);
  EXPECT_EQ(Json::parse(second->body)["body"], "2nd");
}

TEST_F(HttpServerTest, RequestIdIsEchoedOrGenerated) {
  start();
  auto r = http_call(port_, "GET", "/hello", "", "X-Request-Id: abc-123\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header("x-request-id"), "abc-123");
  r = http_call(port_, "GET", "/hello", "", "X-Request-Id: bad id with spaces\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header("x-request-id").size(), 16u);
  auto other = http_call(port_, "GET", "/nowhere");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->header("x-request-id").size(), 16u);
  EXPECT_NE(other->header("x-request-id"), r->header("x-request-id"));
}

TEST_F(HttpServerTest, TokenIsRequiredOnEveryRequest) {
  HttpServer::Options o = local_options();
  o.token = "s3cret-token";
  start(o);
  auto r = http_call(port_, "GET", "/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(r->header("www-authenticate"), "Bearer");
  EXPECT_EQ(Json::parse(r->body)["code"], "unauthenticated");
  r = http_call(port_, "GET", "/hello", "", "Authorization: Bearer wrong\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = http_call(port_, "GET", "/nowhere", "", "Authorization: Bearer wrong\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);  // auth is checked before routing
  r = http_call(port_, "GET", "/hello", "", "Authorization: Bearer s3cret-token\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Refused without reading the body: an unauthenticated upload is not consumed.
  RawHttpClient client(port_);
  ASSERT_TRUE(
      client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n"
                  "Expect: 100-continue\r\n\r\n"));
  auto refused = client.read_response(milliseconds(3000));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
}

TEST_F(HttpServerTest, RefusesNonLoopbackWithoutToken) {
  HttpServer::Options o = local_options();
  o.host = "0.0.0.0";
  auto refused = HttpServer::create(o, Router());
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "refusing to bind 0.0.0.0 without an API token: set --token-file, --tokens-file, "
            "--token or KFORGE_TOKEN");
  o.token = "t";
  auto allowed = HttpServer::create(o, Router());
  ASSERT_TRUE(allowed.is_ok()) << allowed.status().to_string();
  EXPECT_NE((*allowed)->bound_port(), 0);
  // Loopback addresses and names that resolve to them need no token.
  EXPECT_TRUE(HttpServer::check_bind_policy("localhost", false).is_ok());
  EXPECT_TRUE(HttpServer::check_bind_policy("127.3.2.1", false).is_ok());
  EXPECT_TRUE(HttpServer::check_bind_policy("::1", false).is_ok());
}

// Issue #8 item 9: the policy looks at the resolved address, not at the text. A name that
// only starts like a loopback address is resolved like any name (".invalid" never resolves,
// RFC 6761), and refused clearly when it does not.
TEST_F(HttpServerTest, BindPolicyResolvesNamesInsteadOfMatchingPrefixes) {
  Status s = HttpServer::check_bind_policy("127.0.0.1.invalid", false);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_EQ(s.field_path(), "host");
  EXPECT_NE(s.message().find("cannot resolve '127.0.0.1.invalid'"), std::string::npos)
      << s.message();
  HttpServer::Options o = local_options();
  o.host = "127.0.0.1.invalid";
  EXPECT_EQ(HttpServer::create(o, Router()).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(HttpServer::check_bind_policy("10.1.2.3", false).code(),
            ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(HttpServer::check_bind_policy("10.1.2.3", true).is_ok());
}

TEST_F(HttpServerTest, ForeignHostHeaderIsRefusedOnALoopbackServerWithoutToken) {
  start();
  RawHttpClient client(port_);
  ASSERT_TRUE(client.send("GET /hello HTTP/1.1\r\nHost: attacker.example\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
}

TEST_F(HttpServerTest, ForgottenResponderIs500AndDeadlineFires) {
  start();
  auto r = http_call(port_, "GET", "/forget");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  r = http_call(port_, "GET", "/deadline");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202);
  EXPECT_EQ(Json::parse(r->body)["deadline"], true);
}

TEST_F(HttpServerTest, StreamingRouteDeliversEventsInOrderWithKeepAlives) {
  start();
  RawHttpClient client(port_);
  ASSERT_TRUE(client.send(make_request("GET", "/stream?n=5&gap_ms=30")));
  auto head = client.read_head();
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->header("content-type"), "text/event-stream");
  EXPECT_EQ(head->header("transfer-encoding"), "chunked");
  EXPECT_EQ(head->header("cache-control"), "no-cache");
  std::string body;
  while (true) {
    auto chunk = client.read_chunk();
    ASSERT_TRUE(chunk) << "stream cut after: " << body;
    if (chunk->empty()) break;
    body += *chunk;
  }
  size_t pos = 0;
  for (int i = 0; i < 5; ++i) {
    std::string expected =
        "id: " + std::to_string(i) + "\ndata: event " + std::to_string(i) + "\n\n";
    size_t at = body.find(expected, pos);
    ASSERT_NE(at, std::string::npos) << "event " << i << " missing or out of order in:\n" << body;
    pos = at + expected.size();
  }
  // 30 ms gaps with a 20 ms keep-alive interval: at least one comment.
  EXPECT_NE(body.find(": keep-alive\n\n"), std::string::npos) << body;
  // The connection stays usable after the stream ended.
  ASSERT_TRUE(client.send(make_request("GET", "/hello")));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// A client that goes away while waiting (a reset: an end of stream alone may be a half-close,
// see HalfClosedClientStillGetsItsAnswer) cancels the exchange.
TEST_F(HttpServerTest, ClientLeavingAStreamCancelsItsProducer) {
  start();
  RawHttpClient client(port_);
  ASSERT_TRUE(client.send(make_request("GET", "/stream-forever")));
  auto head = client.read_head();
  ASSERT_TRUE(head);
  auto first = client.read_chunk();
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, "data: first\n\n");
  client.reset();
  ASSERT_TRUE(routes_.cancels_.wait_for(1));
  EXPECT_EQ(routes_.cancels_.values()[0], CancelReason::kClientGone);
}

TEST_F(HttpServerTest, ClientLeavingWhileWaitingCancelsTheExchange) {
  start();
  RawHttpClient client(port_);
  ASSERT_TRUE(client.send(make_request("GET", "/hold")));
  ASSERT_TRUE(routes_.holds_.wait_for(1));
  client.reset();
  ASSERT_TRUE(routes_.cancels_.wait_for(1));
  EXPECT_EQ(routes_.cancels_.values()[0], CancelReason::kClientGone);
}

// shutdown(SHUT_WR) right after a complete request is a half-close, not a departure: the
// answer must still come (issue #8, item 10).
TEST_F(HttpServerTest, HalfClosedClientStillGetsItsAnswer) {
  start();
  for (int i = 0; i < 20; ++i) {
    RawHttpClient client(port_);
    ASSERT_TRUE(client.send(make_request("GET", "/slow?ms=30")));
    client.shutdown_write();
    auto r = client.read_response(milliseconds(5000));
    ASSERT_TRUE(r) << "request " << i << " got no answer";
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(Json::parse(r->body)["slept_ms"], 30);
  }
  EXPECT_TRUE(routes_.cancels_.values().empty());
}

TEST_F(HttpServerTest, StopLetsInFlightRequestsFinish) {
  start();
  RawHttpClient slow(port_);
  ASSERT_TRUE(slow.send(make_request("GET", "/slow?ms=300")));
  RawHttpClient holder(port_);
  ASSERT_TRUE(holder.send(make_request("GET", "/hold?answer_on_stop=1")));
  RawHttpClient idle(port_);
  ASSERT_TRUE(idle.send(make_request("GET", "/hello")));
  ASSERT_TRUE(idle.read_response());
  ASSERT_TRUE(routes_.holds_.wait_for(1));
  ASSERT_TRUE(routes_.slow_started_.wait_for(1));

  std::thread stopper([this] { EXPECT_TRUE(harness_->stop_within(std::chrono::seconds(5))); });
  auto r = slow.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->header("connection"), "close");
  auto held = holder.read_response();
  ASSERT_TRUE(held);
  EXPECT_EQ(held->status, 503);
  EXPECT_TRUE(idle.wait_for_close());
  stopper.join();
  EXPECT_EQ(routes_.cancels_.values().at(0), CancelReason::kServerStopping);
}

TEST_F(HttpServerTest, DrainTimeoutClosesWhatIsLeft) {
  HttpServer::Options o = local_options();
  o.drain_timeout = milliseconds(200);
  start(o);
  RawHttpClient holder(port_);
  ASSERT_TRUE(holder.send(make_request("GET", "/hold")));  // ignores the stop
  ASSERT_TRUE(routes_.holds_.wait_for(1));
  auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(harness_->stop_within(std::chrono::seconds(5)));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(3));
  EXPECT_TRUE(holder.wait_for_close(milliseconds(2000)));
}

TEST_F(HttpServerTest, SeveralIoThreadsServeConcurrentRequests) {
  HttpServer::Options o = local_options();
  o.io_threads = 3;
  start(o);
  std::vector<std::unique_ptr<RawHttpClient>> clients;
  for (int i = 0; i < 20; ++i) {
    clients.push_back(std::make_unique<RawHttpClient>(port_));
    ASSERT_TRUE(clients.back()->send(make_request("GET", "/slow?ms=20")));
  }
  for (auto& c : clients) {
    auto r = c->read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
}

}  // namespace
}  // namespace kforge::frontends::http
