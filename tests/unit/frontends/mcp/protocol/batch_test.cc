#include "kforge/frontends/mcp/protocol/batch.h"

#include <gtest/gtest.h>

#include <vector>

namespace kforge::frontends::mcp {
namespace {

TEST(BatchTest, OnlyIn2025_03_26AndNeverEmptyOrWithInitialize) {
  Json ping = Json::array({{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}}});
  EXPECT_TRUE(check_batch(ping, "2025-03-26").is_ok());
  EXPECT_FALSE(check_batch(ping, "2025-06-18").is_ok());
  EXPECT_FALSE(check_batch(ping, "2025-11-25").is_ok());
  EXPECT_FALSE(check_batch(Json::array(), "2025-03-26").is_ok());
  Json init = Json::array({{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"}}});
  EXPECT_FALSE(check_batch(init, "2025-03-26").is_ok());
}

TEST(BatchTest, CollectsEveryAnswerOnceAndSkipsCancelledRequests) {
  std::vector<Json> arrays;
  std::vector<Json> related;
  auto batch = BatchCollector::create(
      3, [&](Json responses) { arrays.push_back(std::move(responses)); },
      [&](const Json& m) { related.push_back(m); });
  auto first = batch->channel();
  auto second = batch->channel();
  batch->add(Json{{"id", "invalid"}});
  first->send_related(Json{{"method", "notifications/progress"}});
  first->send_response(Json{{"id", 1}});
  EXPECT_TRUE(arrays.empty());
  second->abandon();
  ASSERT_EQ(arrays.size(), 1u);
  EXPECT_EQ(arrays[0], (Json::array({{{"id", "invalid"}}, {{"id", 1}}})));
  EXPECT_EQ(related.size(), 1u);
  second->send_response(Json{{"id", 2}});  // late: ignored
  EXPECT_EQ(arrays.size(), 1u);
}

}  // namespace
}  // namespace kforge::frontends::mcp
