// Revision 2026-07-28: the _meta ladder, result decoration, the header rules and the sealed
// requestState of input_required results.
#include "kforge/frontends/mcp/protocol/modern.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "kforge/common/files.h"
#include "kforge/common/random.h"
#include "kforge/frontends/mcp/http_headers.h"
#include "kforge/frontends/mcp/protocol/input_required.h"
#include "kforge/frontends/mcp/protocol/jsonrpc.h"

namespace kforge::frontends::mcp {
namespace {

Json meta_params(Json meta) {
  return Json{{"_meta", std::move(meta)}};
}

http::HttpRequest request_with(std::vector<std::pair<std::string, std::string>> headers) {
  http::HttpRequest r;
  for (auto& [k, v] : headers)
    r.headers.emplace_back(k, v);
  return r;
}

TEST(ModernTest, TheBodyClaimDecidesTheEra) {
  EXPECT_TRUE(modern::claims_modern(Json::parse(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}})")));
  EXPECT_FALSE(modern::claims_modern(
      Json::parse(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{}}})")));
  EXPECT_FALSE(modern::claims_modern(Json::parse(R"({"jsonrpc":"2.0","id":1,"method":"ping"})")));
  EXPECT_TRUE(modern::names_modern_version("2026-07-28"));
  EXPECT_TRUE(modern::names_modern_version("2027-01-01"));
  EXPECT_FALSE(modern::names_modern_version("2025-11-25"));
  EXPECT_FALSE(modern::names_modern_version("v999.0.0"));
}

TEST(ModernTest, MetaShapeNeedsVersionAndCapabilities) {
  auto no_meta = modern::check_meta_shape(Json::object());
  ASSERT_TRUE(no_meta);
  EXPECT_EQ(no_meta->code, jsonrpc::kInvalidParams);
  EXPECT_EQ(no_meta->http_status, 400);
  EXPECT_NE(no_meta->message.find("params._meta"), std::string::npos);

  auto no_caps = modern::check_meta_shape(
      meta_params({{"io.modelcontextprotocol/protocolVersion", "2026-07-28"}}));
  ASSERT_TRUE(no_caps);
  EXPECT_NE(no_caps->message.find("clientCapabilities"), std::string::npos);

  auto no_version = modern::check_meta_shape(
      meta_params({{"io.modelcontextprotocol/clientCapabilities", Json::object()}}));
  ASSERT_TRUE(no_version);
  EXPECT_NE(no_version->message.find("protocolVersion"), std::string::npos);

  EXPECT_FALSE(modern::check_meta_shape(
      meta_params({{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
                   {"io.modelcontextprotocol/clientCapabilities", Json::object()}})));
}

TEST(ModernTest, UnsupportedVersionNamesWhatIsServed) {
  EXPECT_FALSE(modern::check_version("2026-07-28"));
  auto bad = modern::check_version("v999.0.0");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->code, modern::kUnsupportedProtocolVersion);
  EXPECT_EQ((*bad->data)["requested"], "v999.0.0");
  EXPECT_EQ((*bad->data)["supported"], Json::array({"2026-07-28"}));
}

TEST(ModernTest, InvalidLogLevelIsRefused) {
  auto meta =
      modern::read_meta(meta_params({{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
                                     {"io.modelcontextprotocol/clientCapabilities", Json::object()},
                                     {"io.modelcontextprotocol/logLevel", "loud"}}));
  ASSERT_FALSE(meta.is_ok());
  EXPECT_NE(meta.status().message().find("logLevel"), std::string::npos);
}

TEST(ModernTest, ResultsGetResultTypeServerInfoAndCachingHints) {
  const Json info = {{"name", "kforge"}, {"version", "dev"}};
  Json listed = modern::decorate_result("tools/list", Json{{"tools", Json::array()}}, info, false);
  EXPECT_EQ(listed["resultType"], "complete");
  EXPECT_EQ(listed["_meta"]["io.modelcontextprotocol/serverInfo"], info);
  EXPECT_EQ(listed["cacheScope"], "public");
  EXPECT_GE(listed["ttlMs"].get<int64_t>(), 0);

  Json read =
      modern::decorate_result("resources/read", Json{{"contents", Json::array()}}, info, false);
  EXPECT_EQ(read["cacheScope"], "private");

  Json called =
      modern::decorate_result("tools/call", Json{{"content", Json::array()}}, info, false);
  EXPECT_FALSE(called.contains("ttlMs"));

  Json asking = modern::decorate_result(
      "resources/read", Json{{"resultType", "input_required"}, {"inputRequests", Json::object()}},
      info, false);
  EXPECT_EQ(asking["resultType"], "input_required");
  EXPECT_FALSE(asking.contains("ttlMs"));
  EXPECT_FALSE(asking.contains("cacheScope"));

  Json retried =
      modern::decorate_result("resources/read", Json{{"contents", Json::array()}}, info, true);
  EXPECT_FALSE(retried.contains("ttlMs"));
}

TEST(HttpHeadersTest, Base64SentinelIsStrict) {
  EXPECT_EQ(decode_header_value("=?base64?SGVsbG8=?="), "Hello");
  EXPECT_EQ(decode_header_value("  =?base64?SGVsbG8=?=\t"), "Hello");
  EXPECT_FALSE(decode_header_value("=?base64?SGVsbG8?="));      // missing padding
  EXPECT_FALSE(decode_header_value("=?base64?SGVs!!!bG8=?="));  // outside the alphabet
  EXPECT_EQ(decode_header_value("SGVsbG8="), "SGVsbG8=");       // no markers: literal
  EXPECT_EQ(decode_header_value("=?base64?SGVsbG8="), "=?base64?SGVsbG8=");
  EXPECT_EQ(decode_header_value("  spaced  "), "spaced");
}

TEST(HttpHeadersTest, MethodAndNameMustMatchTheBody) {
  const Json params = {{"name", "echo"}};
  EXPECT_FALSE(
      check_method_headers(request_with({{"MCP-METHOD", "tools/call"}, {"mcp-name", "  echo  "}}),
                           "tools/call", params));
  auto wrong_case = check_method_headers(
      request_with({{"Mcp-Method", "TOOLS/CALL"}, {"Mcp-Name", "echo"}}), "tools/call", params);
  ASSERT_TRUE(wrong_case);
  EXPECT_EQ(wrong_case->code, modern::kHeaderMismatch);
  EXPECT_EQ(wrong_case->http_status, 400);
  EXPECT_TRUE(
      check_method_headers(request_with({{"Mcp-Method", "tools/call"}}), "tools/call", params));
  EXPECT_TRUE(check_method_headers(request_with({}), "tools/list", Json::object()));
  // Mcp-Name is not demanded of methods without a name.
  EXPECT_FALSE(
      check_method_headers(request_with({{"Mcp-Method", "tools/list"}}), "tools/list", nullptr));
  EXPECT_FALSE(check_method_headers(
      request_with({{"Mcp-Method", "resources/read"}, {"Mcp-Name", "=?base64?dGVzdDovL3g=?="}}),
      "resources/read", Json{{"uri", "test://x"}}));
}

TEST(HttpHeadersTest, VersionHeaderMustMatchMeta) {
  EXPECT_FALSE(
      check_version_header(request_with({{"MCP-Protocol-Version", "2026-07-28"}}), "2026-07-28"));
  auto missing = check_version_header(request_with({}), "2026-07-28");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->code, modern::kHeaderMismatch);
  EXPECT_TRUE(
      check_version_header(request_with({{"MCP-Protocol-Version", "2026-07-28"}}), "v999.0.0"));
}

TEST(HttpHeadersTest, ParamHeadersMirrorMarkedArguments) {
  const Json schema = Json::parse(R"({"type":"object","properties":{
      "region":{"type":"string","x-mcp-header":"Region"},
      "count":{"type":"integer","x-mcp-header":"Count"},
      "nested":{"type":"object","properties":{"flag":{"type":"boolean","x-mcp-header":"Flag"}}},
      "plain":{"type":"string"}}})");
  EXPECT_FALSE(
      check_param_headers(request_with({{"Mcp-Param-Region", "eu"}, {"mcp-param-count", "007"}}),
                          schema, Json{{"region", "eu"}, {"count", 7}, {"plain", "x"}}));
  EXPECT_TRUE(check_param_headers(request_with({}), schema, Json{{"region", "eu"}}));
  EXPECT_TRUE(check_param_headers(request_with({{"Mcp-Param-Region", "us"}}), schema,
                                  Json{{"region", "eu"}}));
  EXPECT_TRUE(
      check_param_headers(request_with({{"Mcp-Param-Region", "eu"}}), schema, Json::object()));
  EXPECT_FALSE(check_param_headers(request_with({{"Mcp-Param-Flag", "true"}}), schema,
                                   Json{{"nested", {{"flag", true}}}}));
  EXPECT_TRUE(check_param_headers(request_with({{"Mcp-Param-Flag", "false"}}), schema,
                                  Json{{"nested", {{"flag", true}}}}));
  EXPECT_FALSE(check_param_headers(request_with({{"Mcp-Param-Region", "=?base64?ZXU=?="}}), schema,
                                   Json{{"region", "eu"}}));
  EXPECT_TRUE(check_param_headers(request_with({{"Mcp-Param-Region", "=?base64?ZXU?="}}), schema,
                                  Json{{"region", "eu"}}));
}

TEST(InputRequiredTest, SealedStateRefusesTamperingAndTransplants) {
  const std::string state = mrtr::seal_state(Json{{"step", 1}}, "tools/call a");
  auto opened = mrtr::open_state(state, "tools/call a");
  ASSERT_TRUE(opened.is_ok());
  EXPECT_EQ((*opened)["step"], 1);
  EXPECT_FALSE(mrtr::open_state(state + "-TAMPERED", "tools/call a").is_ok());
  EXPECT_FALSE(mrtr::open_state(state, "tools/call b").is_ok());
  EXPECT_FALSE(mrtr::open_state("garbage", "tools/call a").is_ok());
  auto expired = mrtr::open_state(
      mrtr::seal_state(Json{{"step", 1}}, "tools/call a", std::chrono::seconds(-5)),
      "tools/call a");
  ASSERT_FALSE(expired.is_ok());
  EXPECT_EQ(expired.status().field_path(), "requestState");
  // Each seal is unique to its content.
  EXPECT_NE(mrtr::seal_state(Json{{"step", 1}}, "x"), mrtr::seal_state(Json{{"step", 2}}, "x"));
}

TEST(InputRequiredTest, TheKeyFileOutlivesTheProcessAndNamesAForeignSigner) {
  const auto dir = std::filesystem::temp_directory_path() / ("kforge-mrtr-" + random_hex(8));
  ASSERT_TRUE(make_dirs(dir).is_ok());
  const auto first = dir / "a.key";
  // Created on first use (0600), then read as it is: a restarted server reads the same key.
  ASSERT_TRUE(mrtr::use_key_file(first).is_ok());
  EXPECT_EQ(std::filesystem::status(first).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const std::string state = mrtr::seal_state(Json{{"step", 1}}, "tools/call a");
  ASSERT_TRUE(mrtr::use_key_file(first).is_ok());
  EXPECT_TRUE(mrtr::open_state(state, "tools/call a").is_ok());
  // Another server's key: refused, saying so (not "altered").
  ASSERT_TRUE(mrtr::use_key_file(dir / "b.key").is_ok());
  auto foreign = mrtr::open_state(state, "tools/call a");
  ASSERT_FALSE(foreign.is_ok());
  EXPECT_NE(foreign.status().message().find("signed with another key"), std::string::npos)
      << foreign.status().to_string();
  EXPECT_FALSE(mrtr::open_state(mrtr::seal_state(Json(1), "x") + "0", "x").is_ok());
  // A malformed key file is an error naming it.
  ASSERT_TRUE(write_file_atomic(dir / "bad.key", "not hex\n").is_ok());
  Status bad = mrtr::use_key_file(dir / "bad.key");
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("bad.key"), std::string::npos) << bad.to_string();
  ASSERT_TRUE(mrtr::use_key_file(first).is_ok());
  EXPECT_TRUE(mrtr::open_state(state, "tools/call a").is_ok());
  (void)remove_tree(dir);
}

TEST(InputRequiredTest, RoundsAskOnlyThroughDeclaredCapabilities) {
  mrtr::Round round(Json{{"sampling", Json::object()}});
  round.elicit("name", "Name?", Json::object()).sample("q", "Q?", 10).list_roots("roots");
  Json r = round.result("s");
  EXPECT_EQ(r["resultType"], "input_required");
  EXPECT_EQ(r["requestState"], "s");
  ASSERT_EQ(r["inputRequests"].size(), 1u);
  EXPECT_EQ(r["inputRequests"]["q"]["method"], "sampling/createMessage");
  EXPECT_TRUE(mrtr::Round(Json::object()).elicit("n", "N?", Json::object()).empty());

  auto bad = mrtr::input_responses(Json{{"inputResponses", 3}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().field_path(), "inputResponses");
  EXPECT_EQ(*mrtr::input_responses(Json::object()), Json::object());
  EXPECT_TRUE(mrtr::accepted_content(Json{{"k", {{"action", "decline"}}}}, "k").is_null());
}

}  // namespace
}  // namespace kforge::frontends::mcp
