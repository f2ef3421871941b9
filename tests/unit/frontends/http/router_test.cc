// Router, Exchange/Responder and AccessPolicy without a network: handlers answer into an
// Exchange whose answer the test takes directly.
#include "kforge/frontends/http/router.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "kforge/frontends/http/access_policy.h"
#include "kforge/frontends/http/exchange.h"

namespace kforge::frontends::http {
namespace {

// Runs `router.dispatch` for one request and returns the exchange (the responder is dropped).
std::shared_ptr<Exchange> dispatch(const Router& router, std::string method, std::string path,
                                   std::atomic<int>* wakes = nullptr) {
  auto exchange = std::make_shared<Exchange>(
      "rid",
      [wakes] {
        if (wakes != nullptr) ++*wakes;
      },
      1 << 20);
  HttpRequest request;
  request.method = std::move(method);
  request.path = std::move(path);
  router.dispatch(std::move(request), Exchange::make_responder(exchange));
  return exchange;
}

HttpResponse take_response(Exchange& exchange) {
  auto answer = exchange.take_answer();
  EXPECT_TRUE(answer.has_value());
  if (!answer || !answer->response) {
    HttpResponse missing;
    missing.status = -1;
    return missing;
  }
  return *answer->response;
}

Handler answer_with(std::string text) {
  return [text](HttpRequest request, Responder responder) {
    Json params = Json::object();
    for (const auto& [k, v] : request.path_params)
      params[k] = v;
    responder.send(HttpResponse::json(200, Json{{"route", text}, {"params", params}}));
  };
}

Router make_router() {
  Router router;
  EXPECT_TRUE(router.add("GET", "/job/{id}", answer_with("get_job")).is_ok());
  EXPECT_TRUE(router.add("DELETE", "/job/{id}", answer_with("delete_job")).is_ok());
  EXPECT_TRUE(router.add("GET", "/job/stats", answer_with("job_stats")).is_ok());
  EXPECT_TRUE(router.add("POST", "/evaluate", answer_with("evaluate")).is_ok());
  EXPECT_TRUE(router.add("POST", "/", answer_with("root")).is_ok());
  EXPECT_TRUE(router.add("GET", "/a/{x}/b/{y}", answer_with("two")).is_ok());
  return router;
}

TEST(RouterTest, MatchesLiteralsAndDecodesParams) {
  Router router = make_router();
  auto m = router.match("GET", "/job/ab%2Fc");
  ASSERT_NE(m.handler, nullptr);
  EXPECT_EQ(m.path_params.at("id"), "ab/c");
  auto two = router.match("GET", "/a/1/b/2/");
  ASSERT_NE(two.handler, nullptr);
  EXPECT_EQ(two.path_params.at("x"), "1");
  EXPECT_EQ(two.path_params.at("y"), "2");
  EXPECT_NE(router.match("POST", "/").handler, nullptr);
}

TEST(RouterTest, LiteralSegmentBeatsParameter) {
  Router router = make_router();
  auto exchange = dispatch(router, "GET", "/job/stats");
  HttpResponse r = take_response(*exchange);
  EXPECT_EQ(Json::parse(r.body)["route"], "job_stats");
  exchange = dispatch(router, "GET", "/job/123");
  r = take_response(*exchange);
  EXPECT_EQ(Json::parse(r.body)["route"], "get_job");
  EXPECT_EQ(Json::parse(r.body)["params"]["id"], "123");
}

TEST(RouterTest, UnknownPathIs404WithJsonError) {
  Router router = make_router();
  auto exchange = dispatch(router, "GET", "/nope");
  HttpResponse r = take_response(*exchange);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(Json::parse(r.body)["code"], "not_found");
  // An empty parameter segment does not match "/job/{id}".
  EXPECT_EQ(router.match("GET", "/job/").status, 404);
  EXPECT_EQ(router.match("GET", "/job//x").status, 404);
}

TEST(RouterTest, WrongMethodIs405WithSortedAllow) {
  Router router = make_router();
  auto exchange = dispatch(router, "POST", "/job/42");
  HttpResponse r = take_response(*exchange);
  EXPECT_EQ(r.status, 405);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Allow");
  EXPECT_EQ(r.headers[0].second, "DELETE, GET");
  EXPECT_NE(Json::parse(r.body)["message"].get<std::string>().find("POST"), std::string::npos);
  EXPECT_EQ(router.allowed_methods("/evaluate"), "POST");
  EXPECT_EQ(router.allowed_methods("/missing"), "");
}

TEST(RouterTest, MalformedEscapeInPathIs400) {
  Router router = make_router();
  auto exchange = dispatch(router, "GET", "/job/%zz");
  EXPECT_EQ(take_response(*exchange).status, 400);
}

TEST(RouterTest, RejectsBadAndDuplicateRoutes) {
  Router router = make_router();
  EXPECT_EQ(router.add("GET", "/job/{other}", answer_with("x")).code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(router.add("GET", "job", answer_with("x")).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(router.add("GET", "/a/{x}/{x}", answer_with("x")).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(router.add("GET", "/a/{}", answer_with("x")).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(router.add("G T", "/a", answer_with("x")).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(router.add("GET", "/a", Handler()).code(), ErrorCode::kInvalidArgument);
  // The same pattern with another method is fine.
  EXPECT_TRUE(router.add("PUT", "/job/{id}", answer_with("x")).is_ok());
}

TEST(RouterTest, ThrowingHandlerAnswers500) {
  Router router;
  ASSERT_TRUE(
      router.add("GET", "/boom", [](HttpRequest, Responder) { throw std::runtime_error("kaboom"); })
          .is_ok());
  auto exchange = dispatch(router, "GET", "/boom");
  HttpResponse r = take_response(*exchange);
  EXPECT_EQ(r.status, 500);
  EXPECT_NE(r.body.find("kaboom"), std::string::npos);
}

// ---- Exchange / Responder ----

TEST(ExchangeTest, DroppedResponderAnswers500AndWakes) {
  Router router;
  ASSERT_TRUE(router.add("GET", "/forget", [](HttpRequest, Responder) {}).is_ok());
  std::atomic<int> wakes{0};
  auto exchange = dispatch(router, "GET", "/forget", &wakes);
  HttpResponse r = take_response(*exchange);
  EXPECT_EQ(r.status, 500);
  EXPECT_NE(r.body.find("did not answer"), std::string::npos);
  EXPECT_GE(wakes.load(), 1);
}

TEST(ExchangeTest, FirstAnswerWinsFromAnotherThread) {
  std::atomic<int> wakes{0};
  auto exchange = std::make_shared<Exchange>(
      "rid", [&wakes] { ++wakes; }, 1024);
  Responder responder = Exchange::make_responder(exchange);
  std::thread t([responder] {
    responder.send(HttpResponse::json(201, Json{{"n", 1}}));
    responder.send(HttpResponse::json(202, Json{{"n", 2}}));
  });
  t.join();
  HttpResponse r = take_response(*exchange);
  EXPECT_EQ(r.status, 201);
  EXPECT_FALSE(exchange->take_answer().has_value());  // taken once
  EXPECT_EQ(wakes.load(), 1);
}

TEST(ExchangeTest, CancelRunsCallbacksOnceWithAUsableResponder) {
  auto exchange = std::make_shared<Exchange>(
      "rid", [] {}, 1024);
  Responder responder = Exchange::make_responder(exchange);
  int calls = 0;
  responder.on_cancel([&calls](CancelReason reason, const Responder& r) {
    ++calls;
    EXPECT_EQ(reason, CancelReason::kServerStopping);
    r.send(HttpResponse::json(202, Json{{"stopping", true}}));
  });
  exchange->cancel(CancelReason::kServerStopping);
  exchange->cancel(CancelReason::kClientGone);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(responder.cancelled());
  EXPECT_EQ(take_response(*exchange).status, 202);
  // Registered after the cancellation: runs at once.
  bool late = false;
  responder.on_cancel([&late](CancelReason, const Responder&) { late = true; });
  EXPECT_TRUE(late);
}

TEST(ExchangeTest, AnswersAfterClientGoneAreDropped) {
  auto exchange = std::make_shared<Exchange>(
      "rid", [] {}, 1024);
  Responder responder = Exchange::make_responder(exchange);
  exchange->cancel(CancelReason::kClientGone);
  responder.send(HttpResponse::json(200, Json::object()));
  EXPECT_FALSE(exchange->take_answer().has_value());
  EXPECT_FALSE(responder.start_stream(StreamHead{}).is_open());
}

TEST(ExchangeTest, DeadlineFiresOnlyWhenDueAndUnanswered) {
  auto exchange = std::make_shared<Exchange>(
      "rid", [] {}, 1024);
  Responder responder = Exchange::make_responder(exchange);
  int fired = 0;
  responder.on_deadline(std::chrono::milliseconds(50), [&fired](const Responder& r) {
    ++fired;
    r.send(HttpResponse::json(202, Json::object()));
  });
  ASSERT_TRUE(exchange->deadline().has_value());
  exchange->fire_deadline_if_due(std::chrono::steady_clock::now());
  EXPECT_EQ(fired, 0);
  exchange->fire_deadline_if_due(*exchange->deadline() + std::chrono::milliseconds(1));
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(take_response(*exchange).status, 202);
  EXPECT_FALSE(exchange->deadline().has_value());
}

TEST(ExchangeTest, StreamQueuesEventsInOrderAndOverflows) {
  auto exchange = std::make_shared<Exchange>(
      "rid", [] {}, 64);
  Responder responder = Exchange::make_responder(exchange);
  EventStream stream = responder.start_stream(StreamHead{});
  ASSERT_TRUE(stream.is_open());
  ASSERT_TRUE(exchange->take_answer()->stream.has_value());
  EXPECT_TRUE(stream.send_event(SseEvent::of("one")));
  EXPECT_TRUE(stream.send_event(SseEvent::of("two")));
  auto update = exchange->take_stream_update();
  EXPECT_EQ(update.bytes, "data: one\n\ndata: two\n\n");
  EXPECT_FALSE(update.closed);
  EXPECT_FALSE(stream.send_event(SseEvent::of(std::string(100, 'x'))));  // over 64 bytes
  EXPECT_TRUE(exchange->take_stream_update().overflowed);
  EXPECT_FALSE(stream.is_open());
}

TEST(ExchangeTest, DroppingTheLastHandleClosesTheStream) {
  auto exchange = std::make_shared<Exchange>(
      "rid", [] {}, 1024);
  {
    Responder responder = Exchange::make_responder(exchange);
    EventStream stream = responder.start_stream(StreamHead{});
    stream.send_event(SseEvent::of("bye"));
  }
  auto update = exchange->take_stream_update();
  EXPECT_EQ(update.bytes, "data: bye\n\n");
  EXPECT_TRUE(update.closed);
}

TEST(ExchangeTest, FormatsMultiLineEvents) {
  SseEvent retry_event;
  retry_event.retry_ms = 1000;
  EXPECT_EQ(format_sse_event(SseEvent::of("a\nb\r\nc", "message", "7")),
            "event: message\nid: 7\ndata: a\ndata: b\ndata: c\n\n");
  EXPECT_EQ(format_sse_event(retry_event), "retry: 1000\ndata: \n\n");
}

// ---- AccessPolicy ----

HttpRequest request_with(HeaderList headers, std::string method = "GET") {
  HttpRequest r;
  r.method = std::move(method);
  r.path = "/health";
  r.headers = std::move(headers);
  return r;
}

TEST(AccessPolicyTest, TokenIsRequiredAndComparedExactly) {
  AccessPolicy policy(
      {.token = "s3cret", .allowed_origins = {}, .loopback_bind = true, .tokens = {}});
  auto refused = policy.check(request_with({}), "");
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 401);
  ASSERT_EQ(refused->headers.size(), 1u);
  EXPECT_EQ(refused->headers[0],
            (std::pair<std::string, std::string>("WWW-Authenticate", "Bearer")));
  EXPECT_TRUE(policy.check(request_with({{"authorization", "Bearer s3cret"}}), "") == std::nullopt);
  EXPECT_TRUE(policy.check(request_with({{"authorization", "bearer  s3cret "}}), "") ==
              std::nullopt);
  for (const char* wrong :
       {"Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "s3cret", "Bearer "}) {
    EXPECT_TRUE(policy.check(request_with({{"authorization", wrong}}), "").has_value()) << wrong;
  }
  EXPECT_TRUE(AccessPolicy::constant_time_equals("abc", "abc"));
  EXPECT_FALSE(AccessPolicy::constant_time_equals("abcd", "abc"));
  EXPECT_FALSE(AccessPolicy::constant_time_equals("", "abc"));
}

TEST(AccessPolicyTest, OriginAndHostChecks) {
  AccessPolicy policy({.token = "",
                       .allowed_origins = {"https://ui.example"},
                       .loopback_bind = true,
                       .tokens = {}});
  EXPECT_FALSE(policy.check(request_with({{"origin", "http://localhost:5173"}}), "").has_value());
  EXPECT_FALSE(policy.check(request_with({{"origin", "https://ui.example"}}), "").has_value());
  auto evil = policy.check(request_with({{"origin", "https://evil.example"}}), "");
  ASSERT_TRUE(evil.has_value());
  EXPECT_EQ(evil->status, 403);
  // DNS rebinding: a loopback server without a token accepts only loopback Host names.
  EXPECT_FALSE(policy.check(request_with({{"host", "127.0.0.1:8000"}}), "").has_value());
  EXPECT_FALSE(policy.check(request_with({{"host", "[::1]:8000"}}), "").has_value());
  EXPECT_FALSE(policy.check(request_with({{"host", "ui.example"}}), "").has_value());
  EXPECT_EQ(policy.check(request_with({{"host", "rebind.evil.example:8000"}}), "")->status, 403);
  // With a token (or a non-loopback bind) the Host is not restricted.
  AccessPolicy with_token(
      {.token = "t", .allowed_origins = {}, .loopback_bind = true, .tokens = {}});
  EXPECT_FALSE(
      with_token
          .check(request_with({{"host", "kforge.internal"}, {"authorization", "Bearer t"}}), "")
          .has_value());
}

TEST(AccessPolicyTest, EachTokenNamesItsPrincipal) {
  AccessPolicy policy({.token = "single-token-of-default",
                       .allowed_origins = {},
                       .loopback_bind = true,
                       .tokens = {{"alice-token-0123456789", {"alice", model::Role::kUser}},
                                  {"ops-token-0123456789ab", {"ops", model::Role::kAdmin}}}});
  EXPECT_TRUE(policy.has_tokens());
  auto who = [&policy](const char* token) {
    return policy.identify(request_with({{"authorization", std::string("Bearer ") + token}}),
                           "10.0.0.7");
  };
  const auto alice = who("alice-token-0123456789");
  EXPECT_EQ(alice.principal, (model::Principal{"alice", model::Role::kUser}));
  EXPECT_EQ(alice.client.rfind("token ", 0), 0u);
  EXPECT_NE(alice.client.find("peer 10.0.0.7"), std::string::npos);
  EXPECT_EQ(alice.client.find("alice-token"), std::string::npos);  // never the token
  EXPECT_EQ(who("ops-token-0123456789ab").principal,
            (model::Principal{"ops", model::Role::kAdmin}));
  EXPECT_EQ(who("single-token-of-default").principal,
            (model::Principal{"default", model::Role::kUser}));
  EXPECT_NE(who("alice-token-0123456789").client, who("ops-token-0123456789ab").client);
  EXPECT_FALSE(policy.check(request_with({{"authorization", "Bearer ops-token-0123456789ab"}}), "")
                   .has_value());
  // A request without a valid token is refused; were it to get further, it owns nothing.
  EXPECT_TRUE(policy.check(request_with({{"authorization", "Bearer nope"}}), "").has_value());
  const auto nobody = who("nope");
  EXPECT_EQ(nobody.principal.role, model::Role::kUser);
  EXPECT_FALSE(nobody.principal.may_access(""));
  EXPECT_FALSE(nobody.principal.may_access("alice"));
}

TEST(AccessPolicyTest, WithoutTokensEveryClientIsAnonymous) {
  AccessPolicy policy({.token = "", .allowed_origins = {}, .loopback_bind = true, .tokens = {}});
  EXPECT_FALSE(policy.has_tokens());
  const auto id =
      policy.identify(request_with({{"authorization", "Bearer whatever"}}), "127.0.0.1");
  EXPECT_EQ(id.client, "peer 127.0.0.1");
  EXPECT_EQ(id.principal, model::Principal{});
  EXPECT_TRUE(id.principal.may_access("alice"));
  EXPECT_FALSE(id.principal.sees_job_ids());
  EXPECT_TRUE(id.principal.may_administer());
}

TEST(AccessPolicyTest, PreflightIsAnsweredWithoutToken) {
  AccessPolicy policy({.token = "t", .allowed_origins = {}, .loopback_bind = true, .tokens = {}});
  auto r = policy.check(
      request_with({{"origin", "http://127.0.0.1:3000"}, {"access-control-request-method", "POST"}},
                   "OPTIONS"),
      "POST");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 204);
  bool has_allow_origin = false;
  for (const auto& [k, v] : r->headers) {
    if (k == "Access-Control-Allow-Origin") has_allow_origin = v == "http://127.0.0.1:3000";
  }
  EXPECT_TRUE(has_allow_origin);
}

TEST(HttpMessageTest, QueryParsingAndDecoding) {
  auto q = parse_query("wait=false&x=a%20b+c&flag&x2=%41");
  ASSERT_TRUE(q.is_ok());
  EXPECT_EQ(q->at("wait"), "false");
  EXPECT_EQ(q->at("x"), "a b c");
  EXPECT_EQ(q->at("flag"), "");
  EXPECT_EQ(q->at("x2"), "A");
  EXPECT_FALSE(parse_query("bad=%4").is_ok());
  EXPECT_EQ(parse_query("bad=%zz").status().field_path(), "query.bad");
  // Invalid UTF-8 in a response never throws.
  HttpResponse r = HttpResponse::json(200, Json{{"s", std::string("\xff\xfe")}});
  EXPECT_NE(r.body.find("\"s\""), std::string::npos);
}

}  // namespace
}  // namespace kforge::frontends::http
