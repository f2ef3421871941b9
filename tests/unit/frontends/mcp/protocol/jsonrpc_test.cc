#include "kforge/frontends/mcp/protocol/jsonrpc.h"

#include <gtest/gtest.h>

#include "kforge/common/error_mapping.h"

namespace kforge::frontends::mcp::jsonrpc {
namespace {

TEST(JsonRpcTest, ClassifiesRequestsNotificationsAndResponses) {
  auto request = classify(Json::parse(R"({"jsonrpc":"2.0","id":"a","method":"ping"})"));
  ASSERT_TRUE(request.is_ok());
  EXPECT_EQ(request->kind, MessageKind::kRequest);
  EXPECT_EQ(request->id, "a");
  EXPECT_TRUE(request->params.is_null());

  auto note = classify(Json::parse(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})"));
  ASSERT_TRUE(note.is_ok());
  EXPECT_EQ(note->kind, MessageKind::kNotification);
  EXPECT_EQ(note->params["requestId"], 1);

  auto result = classify(Json::parse(R"({"jsonrpc":"2.0","id":7,"result":{}})"));
  ASSERT_TRUE(result.is_ok());
  EXPECT_EQ(result->kind, MessageKind::kResponse);
  EXPECT_FALSE(result->is_error_response());

  auto error = classify(
      Json::parse(R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}})"));
  ASSERT_TRUE(error.is_ok());
  EXPECT_TRUE(error->is_error_response());
}

TEST(JsonRpcTest, AcceptsFractionalIds) {
  // JSON-RPC 2.0: ids are strings or numbers; fractional parts are discouraged, not invalid.
  auto request = classify(Json::parse(R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})"));
  ASSERT_TRUE(request.is_ok());
  EXPECT_EQ(request->id, 1.5);
  EXPECT_NE(id_key(Json(1.5)), id_key(Json(1)));
  EXPECT_EQ(make_result(request->id, Json::object())["id"], 1.5);
}

TEST(JsonRpcTest, RefusesWhatIsNotJsonRpc20) {
  const char* invalid[] = {
      R"([1])",
      R"({"id":1,"method":"ping"})",
      R"({"jsonrpc":"1.0","id":1,"method":"ping"})",
      R"({"jsonrpc":"2.0","id":null,"method":"ping"})",
      R"({"jsonrpc":"2.0","id":true,"method":"ping"})",
      R"({"jsonrpc":"2.0","id":1,"method":""})",
      R"({"jsonrpc":"2.0","id":1,"method":"x","params":[1,2]})",
      R"({"jsonrpc":"2.0","id":1})",
      R"({"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}})",
      R"({"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}})",
      R"({"jsonrpc":"2.0","id":null,"result":{}})",
  };
  for (const char* text : invalid) {
    auto m = classify(Json::parse(text));
    EXPECT_FALSE(m.is_ok()) << text;
    if (!m.is_ok()) {
      EXPECT_EQ(m.status().code(), ErrorCode::kInvalidArgument) << text;
    }
  }
}

TEST(JsonRpcTest, ReadableIdAndKeys) {
  EXPECT_EQ(readable_id(Json::parse(R"({"id":"x","method":5})")), "x");
  EXPECT_EQ(readable_id(Json::parse(R"({"id":1.5})")), 1.5);
  EXPECT_TRUE(readable_id(Json::parse(R"({"id":true})")).is_null());
  EXPECT_TRUE(readable_id(Json::parse("[1]")).is_null());
  EXPECT_NE(id_key(Json(1)), id_key(Json("1")));
}

TEST(JsonRpcTest, ErrorsFromStatusUseTheOneMappingTable) {
  Json e = make_error_from(3, invalid_argument("must be positive", "num_trials"));
  EXPECT_EQ(e["id"], 3);
  EXPECT_EQ(e["error"]["code"], kInvalidParams);
  EXPECT_EQ(e["error"]["code"], jsonrpc_code_for(ErrorCode::kInvalidArgument));
  EXPECT_EQ(e["error"]["message"], "num_trials: must be positive");
  EXPECT_EQ(e["error"]["data"]["field"], "num_trials");
  EXPECT_EQ(make_error_from(1, internal_error("x"))["error"]["code"], kInternalError);
  EXPECT_FALSE(make_error_from(1, internal_error("x"))["error"].contains("data"));
}

TEST(JsonRpcTest, BuildersProduceValidMessages) {
  EXPECT_TRUE(classify(make_result(1, Json::object())).is_ok());
  EXPECT_TRUE(classify(make_error(nullptr, kParseError, "bad")).is_ok());
  EXPECT_TRUE(classify(make_notification("notifications/progress", Json::object())).is_ok());
  EXPECT_EQ(make_notification("n", nullptr).count("params"), 0u);
  EXPECT_TRUE(classify(make_request("s-1", "sampling/createMessage", Json::object())).is_ok());
}

}  // namespace
}  // namespace kforge::frontends::mcp::jsonrpc
