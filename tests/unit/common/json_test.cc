// parse_json: the one parser of untrusted JSON, with its nesting limit (issue #8 item 5).
#include "kforge/common/json.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace kforge {
namespace {

std::string nested_arrays(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

std::string nested_objects(size_t depth) {
  std::string text;
  for (size_t i = 0; i < depth; ++i)
    text += "{\"a\":";
  text += "1";
  text += std::string(depth, '}');
  return text;
}

TEST(ParseJsonTest, AcceptsUpToTheLimitAndRefusesOneMore) {
  auto ok = parse_json(nested_arrays(64), 64);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(json_depth(*ok), 64u);
  auto deep = parse_json(nested_arrays(65), 64);
  ASSERT_FALSE(deep.is_ok());
  EXPECT_EQ(deep.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(deep.status().message(),
            "body is not valid JSON: nested deeper than the limit of 64 levels "
            "(--max-json-depth)");
  EXPECT_TRUE(parse_json(nested_objects(64), 64).is_ok());
  EXPECT_FALSE(parse_json(nested_objects(65), 64).is_ok());
  // Objects and arrays count alike.
  EXPECT_FALSE(parse_json(R"({"a":[{"b":[1]}]})", 3).is_ok());
  EXPECT_TRUE(parse_json(R"({"a":[{"b":[1]}]})", 4).is_ok());
}

TEST(ParseJsonTest, BracketsInsideStringsAreNotNesting) {
  auto ok = parse_json(R"({"s": "[[[[[[[[[[{{{{{{{{{{"})", 1);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(json_depth(*ok), 1u);
}

// The attack of the issue: ~100k levels in ~200 KB overflowed the stack in a recursive
// copy. It must be refused while parsing, quickly, before anything deep exists.
TEST(ParseJsonTest, HundredThousandLevelsAreRefusedQuickly) {
  for (const std::string& text :
       {nested_arrays(100000), nested_objects(100000), std::string(100000, '[')}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = parse_json(text);
    EXPECT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("nested deeper"), std::string::npos)
        << r.status().message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  }
}

TEST(ParseJsonTest, SyntaxErrorsKeepTheirMessage) {
  auto bad = parse_json("{not json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message().rfind("body is not valid JSON: [json.exception.parse_error", 0),
            0u)
      << bad.status().message();
  EXPECT_FALSE(parse_json("[1] trailing").is_ok());
  EXPECT_FALSE(parse_json("").is_ok());
  auto scalar = parse_json("  42 ");
  ASSERT_TRUE(scalar.is_ok());
  EXPECT_EQ(*scalar, 42);
  // Duplicate keys: the last wins, as with Json::parse.
  EXPECT_EQ((*parse_json(R"({"a":1,"a":2})"))["a"], 2);
}

TEST(ParseJsonTest, TheProcessWideLimitIsConfigurableWithinBounds) {
  EXPECT_EQ(max_json_depth(), kDefaultMaxJsonDepth);
  EXPECT_FALSE(parse_json(nested_arrays(65)).is_ok());
  ASSERT_TRUE(set_max_json_depth(100).is_ok());
  EXPECT_TRUE(parse_json(nested_arrays(65)).is_ok());
  EXPECT_EQ(set_max_json_depth(0).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(set_max_json_depth(kMaxJsonDepthCeiling + 1).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(max_json_depth(), 100u);
  ASSERT_TRUE(set_max_json_depth(kDefaultMaxJsonDepth).is_ok());
}

TEST(ParseJsonTest, JsonDepthNeedsNoRecursion) {
  Json deep = Json::array();
  Json* tip = &deep;
  for (int i = 0; i < 200000; ++i) {  // built by hand: parse_json would refuse it
    tip->push_back(Json::array());
    tip = &(*tip)[0];
  }
  EXPECT_EQ(json_depth(deep), 200001u);
  EXPECT_EQ(json_depth(Json(1)), 0u);
  EXPECT_EQ(json_depth(Json::object()), 1u);
}

TEST(JsonPathTest, KeysAndIndicesComposeTheFieldPathOfErrors) {
  const JsonPath root;
  EXPECT_EQ(root.str(), "");
  EXPECT_EQ(root.display(), "<root>");
  EXPECT_EQ(root.key("kernel").str(), "kernel");
  EXPECT_EQ(root.index(2).str(), "[2]");
  const JsonPath p = root.key("custom_kernel").key("io").key("args").index(12).key("tensor_spec");
  EXPECT_EQ(p.str(), "custom_kernel.io.args[12].tensor_spec");
  EXPECT_EQ(p.display(), p.str());
  EXPECT_EQ(JsonPath("a").key("b").index(0).index(1).str(), "a.b[0][1]");
}

TEST(JsonTypeNameTest, NamesEveryJsonType) {
  EXPECT_EQ(json_type_name(Json()), "null");
  EXPECT_EQ(json_type_name(Json::object()), "object");
  EXPECT_EQ(json_type_name(Json::array()), "array");
  EXPECT_EQ(json_type_name(Json("x")), "string");
  EXPECT_EQ(json_type_name(Json(true)), "boolean");
  EXPECT_EQ(json_type_name(Json(-3)), "integer");
  EXPECT_EQ(json_type_name(Json(uint64_t{1} << 63)), "integer");
  EXPECT_EQ(json_type_name(Json(2.5)), "number");
}

TEST(JsonDepthTest, CountsArraysAndObjectsOneLevelEach) {
  EXPECT_EQ(json_depth(Json(1)), 0u);
  EXPECT_EQ(json_depth(Json::array()), 1u);
  EXPECT_EQ(json_depth(Json::parse(R"({"a":[1,{"b":[]}],"c":2})")), 4u);
  EXPECT_EQ(json_depth(Json::parse(nested_arrays(200))), 200u);
}

}  // namespace
}  // namespace kforge
