#include "kforge/frontends/mcp/protocol/session_store.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "frontends/mcp/mcp_test_support.h"
#include "kforge/frontends/mcp/protocol/request_context.h"

namespace kforge::frontends::mcp {
namespace {

using std::chrono::hours;
using std::chrono::minutes;

class SessionStoreTest : public ::testing::Test {
 protected:
  SessionStore::Options options(size_t max = 100) {
    SessionStore::Options o;
    o.idle_ttl = hours(24);
    o.pending_ttl = hours(24);
    o.max_sessions = max;
    o.clock = [this] { return now_; };
    return o;
  }
  std::chrono::steady_clock::time_point now_ = std::chrono::steady_clock::now();
};

class NullSink : public MessageSink {
 public:
  bool send(const Json&) override { return true; }
  void close() override { closed = true; }
  bool closed = false;
};

TEST_F(SessionStoreTest, IdsAreRandomVisibleAscii) {
  SessionStore store(options());
  std::set<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    auto s = store.create();
    ASSERT_TRUE(s.is_ok());
    EXPECT_TRUE(std::regex_match((*s)->id(), std::regex("[0-9a-f]{32}")));
    ids.insert((*s)->id());
  }
  EXPECT_EQ(ids.size(), 50u);
  EXPECT_EQ(store.size(), 50u);
}

// Issue #37: a session acts for the principal that opened it; another principal's requests
// get the unknown session's answer and leave it untouched.
TEST_F(SessionStoreTest, ASessionIsItsOwners) {
  SessionStore store(options());
  const SessionOwner alice{"alice", "user"};
  const SessionOwner bob{"bob", "user"};
  auto s = store.create("token 1 peer x", alice);
  ASSERT_TRUE(s.is_ok());
  const std::string id = (*s)->id();
  EXPECT_EQ((*s)->owner(), alice);
  auto other = store.find(id, &bob);
  ASSERT_FALSE(other.is_ok());
  EXPECT_EQ(other.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(other.status().message(),
            "MCP session '" + id + "' is unknown or has ended; send initialize again");
  EXPECT_EQ(store.pending(), 1u);  // not marked as used by the other owner
  EXPECT_FALSE(store.remove(id, &bob));
  EXPECT_TRUE(store.find(id, &alice).is_ok());
  EXPECT_TRUE(store.remove(id, &alice));
}

TEST_F(SessionStoreTest, UnknownAndRemovedSessionsAreNotFound) {
  SessionStore store(options());
  auto s = store.create();
  ASSERT_TRUE(s.is_ok());
  const std::string id = (*s)->id();
  EXPECT_TRUE(store.find(id).is_ok());
  EXPECT_EQ(store.find("nope").status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(store.remove(id));
  EXPECT_TRUE((*s)->closed());
  EXPECT_EQ(store.find(id).status().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(store.remove(id));
}

TEST_F(SessionStoreTest, IdleSessionsExpireButBusyOnesDoNot) {
  SessionStore store(options());
  auto idle = store.create();
  auto busy = store.create();
  auto streaming = store.create();
  ASSERT_TRUE(idle.is_ok() && busy.is_ok() && streaming.is_ok());
  auto ctx = std::make_shared<RequestContext>(*busy, 1, "tools/call", nullptr,
                                              std::make_shared<testing::RecordingChannel>());
  ASSERT_TRUE((*busy)->begin_request(1, ctx).is_ok());
  auto sink = std::make_shared<NullSink>();
  (*streaming)->set_standalone_sink(sink);

  now_ += hours(23);
  EXPECT_TRUE(store.find((*idle)->id()).is_ok());  // activity restarts the clock
  now_ += hours(23) + minutes(59);
  EXPECT_TRUE(store.find((*idle)->id()).is_ok());
  now_ += hours(25);
  EXPECT_EQ(store.find((*idle)->id()).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(store.find((*busy)->id()).is_ok());
  EXPECT_TRUE(store.find((*streaming)->id()).is_ok());
  EXPECT_FALSE(sink->closed);
}

// A request in flight holds its session; a session that ended and still held its requests
// kept both alive forever (LeakSanitizer, make asan-test).
TEST_F(SessionStoreTest, AnEndedSessionLetsGoOfItsRequestsInFlight) {
  SessionStore store(options());
  std::weak_ptr<Session> session;
  std::weak_ptr<RequestContext> request;
  std::string id;
  {
    auto s = store.create();
    ASSERT_TRUE(s.is_ok());
    id = (*s)->id();
    session = *s;
    auto ctx = std::make_shared<RequestContext>(*s, 1, "tools/call", nullptr,
                                                std::make_shared<testing::RecordingChannel>());
    request = ctx;
    ASSERT_TRUE((*s)->begin_request(1, ctx).is_ok());
  }
  EXPECT_FALSE(request.expired());  // in flight: the session holds it
  ASSERT_TRUE(store.remove(id));
  EXPECT_TRUE(request.expired());
  EXPECT_TRUE(session.expired());
}

TEST_F(SessionStoreTest, NoRequestBeginsOnAnEndedSession) {
  SessionStore store(options());
  auto s = store.create();
  ASSERT_TRUE(s.is_ok());
  ASSERT_TRUE(store.remove((*s)->id()));
  auto ctx = std::make_shared<RequestContext>(*s, 1, "tools/call", nullptr,
                                              std::make_shared<testing::RecordingChannel>());
  Status begun = (*s)->begin_request(1, ctx);
  EXPECT_EQ(begun.code(), ErrorCode::kUnavailable);
  EXPECT_EQ((*s)->requests_in_flight(), 0u);
}

// Issue #8 item 9: 10,001 unauthenticated initialize calls evicted an idle session in use.
TEST_F(SessionStoreTest, AnInitializeFloodNeverEvictsASessionInUse) {
  SessionStore::Options o = options(100);
  o.max_pending_sessions = 50;
  SessionStore store(o);
  auto legit = store.create("peer 10.0.0.1");
  ASSERT_TRUE(legit.is_ok());
  ASSERT_TRUE(store.find((*legit)->id()).is_ok());  // used: established
  for (int i = 0; i < 10001; ++i) {
    now_ += std::chrono::milliseconds(1);
    ASSERT_TRUE(store.create("peer 10.0.0.66").is_ok()) << i;
  }
  EXPECT_EQ(store.pending(), 50u);
  EXPECT_EQ(store.size(), 51u);
  EXPECT_TRUE(store.find((*legit)->id()).is_ok());
  EXPECT_FALSE((*legit)->closed());
}

TEST_F(SessionStoreTest, PendingSessionsMakeRoomOldestFirstAndExpireSooner) {
  SessionStore::Options o = options(100);
  o.max_pending_sessions = 2;
  o.pending_ttl = minutes(10);
  SessionStore store(o);
  auto a = store.create();
  now_ += minutes(1);
  auto b = store.create();
  now_ += minutes(1);
  auto c = store.create();
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  EXPECT_TRUE((*a)->closed());
  EXPECT_FALSE(store.find((*a)->id()).is_ok());
  EXPECT_TRUE(store.find((*b)->id()).is_ok());  // now established
  now_ += minutes(11);
  EXPECT_FALSE(store.find((*c)->id()).is_ok());  // never used: expired
  EXPECT_TRUE(store.find((*b)->id()).is_ok());   // used: 24 h
}

TEST_F(SessionStoreTest, WhenEstablishedSessionsAreAtTheCapInitializeIsRefused) {
  SessionStore store(options(2));
  for (int i = 0; i < 2; ++i) {
    auto s = store.create();
    ASSERT_TRUE(s.is_ok());
    ASSERT_TRUE(store.find((*s)->id()).is_ok());
  }
  auto refused = store.create();
  EXPECT_EQ(refused.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("--mcp-max-sessions"), std::string::npos);
  EXPECT_EQ(store.size(), 2u);
}

TEST_F(SessionStoreTest, OneClientsCapReplacesItsOwnPendingSessionsThenRefuses) {
  SessionStore::Options o = options(100);
  o.max_sessions_per_client = 2;
  SessionStore store(o);
  auto other = store.create("peer 10.0.0.1");
  auto a = store.create("peer 10.0.0.2");
  auto b = store.create("peer 10.0.0.2");
  ASSERT_TRUE(other.is_ok() && a.is_ok() && b.is_ok());
  auto c = store.create("peer 10.0.0.2");  // replaces a, its own oldest pending one
  ASSERT_TRUE(c.is_ok());
  EXPECT_TRUE((*a)->closed());
  EXPECT_FALSE((*other)->closed());
  ASSERT_TRUE(store.find((*b)->id()).is_ok());
  ASSERT_TRUE(store.find((*c)->id()).is_ok());
  auto refused = store.create("peer 10.0.0.2");  // both in use: nothing to replace
  EXPECT_EQ(refused.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--mcp-max-sessions-per-client"), std::string::npos);
  EXPECT_TRUE(store.create("peer 10.0.0.1").is_ok());
}

TEST_F(SessionStoreTest, WhenEveryPendingSessionIsBusyCreationFails) {
  SessionStore::Options o = options(100);
  o.max_pending_sessions = 1;
  SessionStore store(o);
  auto a = store.create();
  auto sink = std::make_shared<NullSink>();
  (*a)->set_standalone_sink(sink);
  auto b = store.create();
  EXPECT_EQ(b.status().code(), ErrorCode::kUnavailable);
}

TEST_F(SessionStoreTest, DestroyingTheStoreClosesSessionsAndTheirStreams) {
  auto sink = std::make_shared<NullSink>();
  std::shared_ptr<Session> kept;
  {
    SessionStore store(options());
    kept = *store.create();
    kept->set_standalone_sink(sink);
  }
  EXPECT_TRUE(kept->closed());
  EXPECT_TRUE(sink->closed);
  EXPECT_FALSE(kept->send_standalone(Json::object()));
}

}  // namespace
}  // namespace kforge::frontends::mcp

namespace kforge::frontends::mcp {
namespace {

TEST(SessionClientNameTest, IsTheClientInfosNameAndVersion) {
  Session s("id", "peer", SessionOwner{});
  EXPECT_EQ(s.client_name(), "");  // before initialize
  s.set_initialized("2025-11-25", Json::object(), {{"name", "claude-code"}, {"version", "2.1"}});
  EXPECT_EQ(s.client_name(), "claude-code 2.1");
  s.set_initialized("2025-11-25", Json::object(), {{"name", "cursor"}});
  EXPECT_EQ(s.client_name(), "cursor");
  s.set_initialized("2025-11-25", Json::object(), {{"name", 7}});  // not a string: nothing
  EXPECT_EQ(s.client_name(), "");
}

}  // namespace
}  // namespace kforge::frontends::mcp
