#include "kforge/frontends/mcp/protocol/json_schema.h"

#include <gtest/gtest.h>

#include "kforge/frontends/mcp/kernel_tool_schemas.h"

namespace kforge::frontends::mcp {
namespace {

const Json kSchema = Json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1},
    "count": {"type": "integer", "minimum": 1, "maximum": 10},
    "ratio": {"type": "number", "exclusiveMinimum": 0},
    "mode": {"type": "string", "enum": ["fast", "slow"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    "nested": {"type": "object", "properties": {"flag": {"type": "boolean"}}, "required": ["flag"]},
    "either": {"type": ["string", "null"]},
    "anything": {"description": "no constraint"}
  },
  "required": ["name"],
  "additionalProperties": false
})");

std::string error_of(const Json& value) {
  Status s = validate_json(kSchema, value);
  return s.is_ok() ? std::string("ok") : s.to_string();
}

TEST(JsonSchemaTest, AcceptsConformingValues) {
  EXPECT_EQ(error_of(Json::parse(R"({"name":"x"})")), "ok");
  EXPECT_EQ(error_of(Json::parse(
                R"({"name":"x","count":5.0,"ratio":0.5,"mode":"fast","tags":["a"],
                    "nested":{"flag":true},"either":null,"anything":[1,{"a":2}]})")),
            "ok");
}

TEST(JsonSchemaTest, ReportsThePathAndTheReason) {
  EXPECT_EQ(error_of(Json::array()), "arguments: must be an object, got array");
  EXPECT_EQ(error_of(Json::object()), "name: is required");
  EXPECT_EQ(error_of(Json::parse(R"({"name":""})")), "name: must not be empty");
  EXPECT_EQ(error_of(Json::parse(R"({"name":"x","count":0})")), "count: must be at least 1, got 0");
  EXPECT_EQ(error_of(Json::parse(R"({"name":"x","count":2.5})")),
            "count: must be an integer, got number");
  EXPECT_EQ(error_of(Json::parse(R"({"name":"x","ratio":0})")),
            "ratio: must be greater than 0, got 0");
  EXPECT_EQ(error_of(Json::parse(R"({"name":"x","mode":"warp"})")),
            "mode: must be one of \"fast\", \"slow\", got \"warp\"");
  EXPECT_EQ(error_of(Json::parse(R"({"name":"x","mode":""})")),
            "mode: must not be empty (expected one of \"fast\", \"slow\")");
  EXPECT_EQ(error_of(Json::parse(R"({"name":"x","tags":["a",3]})")),
            "tags[1]: must be a string, got integer");
  EXPECT_EQ(error_of(Json::parse(R"({"name":"x","tags":["a","b","c"]})")),
            "tags: must have at most 2 items");
  EXPECT_EQ(error_of(Json::parse(R"({"name":"x","nested":{}})")), "nested.flag: is required");
  EXPECT_EQ(error_of(Json::parse(R"({"name":"x","either":1})")),
            "either: must be a string or null, got integer");
  EXPECT_EQ(error_of(Json::parse(R"({"name":"x","nmae":"y"})")),
            "nmae: is not a known field (expected one of: anything, count, either, mode, name, "
            "nested, ratio, tags)");
}

TEST(JsonSchemaTest, RefusesKeywordsItCannotCheck) {
  EXPECT_TRUE(check_supported_schema(kSchema).is_ok());
  Status s = check_supported_schema(
      Json::parse(R"({"type":"object","properties":{"a":{"oneOf":[{"type":"string"}]}}})"));
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.field_path(), "schema.properties.a.oneOf");
  EXPECT_FALSE(check_supported_schema(Json::parse(R"({"anyOf":[]})")).is_ok());
  EXPECT_FALSE(check_supported_schema(Json::parse(R"({"allOf":[{"pattern":"x"}]})")).is_ok());
  EXPECT_FALSE(check_supported_schema(Json::parse(R"({"type":"strnig"})")).is_ok());
  EXPECT_FALSE(check_supported_schema(Json::parse(R"({"minLength":-1})")).is_ok());
  EXPECT_FALSE(check_supported_schema(Json::parse(R"({"pattern":"^a"})")).is_ok());
}

TEST(JsonSchemaTest, CompositionAndConditionals) {
  // The conformance suite's SEP-2106 schema: a phone or an email; the one contactMethod names.
  const Json schema = Json::parse(R"({
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object"}},
    "properties": {"contactMethod": {"type": "string", "enum": ["phone", "email"]},
                   "phone": {"type": "string"}, "email": {"type": "string"},
                   "grid": {"anyOf": [{"type": "object"}, {"type": "array"}]}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]}
  })");
  ASSERT_TRUE(check_supported_schema(schema).is_ok());
  EXPECT_TRUE(validate_json(schema, Json{{"contactMethod", "phone"}, {"phone", "1"}}).is_ok());
  EXPECT_TRUE(validate_json(schema, Json{{"email", "a@b"}}).is_ok());
  EXPECT_FALSE(validate_json(schema, Json::object()).is_ok());  // allOf: neither
  Status then = validate_json(schema, Json{{"contactMethod", "phone"}, {"email", "a@b"}});
  ASSERT_FALSE(then.is_ok());
  EXPECT_EQ(then.field_path(), "phone");
  EXPECT_TRUE(validate_json(schema, Json{{"email", "a@b"}, {"grid", Json::array({1})}}).is_ok());
  Status grid = validate_json(schema, Json{{"email", "a@b"}, {"grid", 3}});
  ASSERT_FALSE(grid.is_ok());
  EXPECT_EQ(grid.field_path(), "grid");
  EXPECT_NE(grid.message().find("matches none of the allowed forms"), std::string::npos);
}

TEST(JsonSchemaTest, LocalReferencesToDefs) {
  const Json schema = Json::parse(R"({
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}},
    "properties": {"home": {"$ref": "#/$defs/address"}},
    "additionalProperties": false
  })");
  ASSERT_TRUE(check_supported_schema(schema).is_ok());
  EXPECT_TRUE(validate_json(schema, Json::parse(R"({"home":{"city":"Paris"}})")).is_ok());
  EXPECT_EQ(validate_json(schema, Json::parse(R"({"home":{"city":7}})")).to_string(),
            "home.city: must be a string, got integer");
  EXPECT_EQ(check_supported_schema(Json::parse(R"({"$ref":"#/$defs/missing"})")).field_path(),
            "schema.$ref");
  EXPECT_FALSE(check_supported_schema(Json::parse(R"({"$ref":"http://x/schema"})")).is_ok());
}

// Issue #8 item 5: every recursive walk of untrusted data is bounded. A self-referencing
// schema (which would recurse for ever) and a deep value under a recursive schema end with
// an error, not a stack overflow.
TEST(JsonSchemaTest, RecursionIsBounded) {
  const Json cycle = Json::parse(R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})");
  ASSERT_TRUE(check_supported_schema(cycle).is_ok());
  Status s = validate_json(cycle, Json::object());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("nested too deeply"), std::string::npos) << s.to_string();

  const Json tree = Json::parse(
      R"({"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
          "$ref": "#/$defs/node"})");
  Json deep = Json::array();
  Json* tip = &deep;
  for (int i = 0; i < 5000; ++i) {
    tip->push_back(Json::array());
    tip = &(*tip)[0];
  }
  EXPECT_NE(validate_json(tree, deep).message().find("nested too deeply"), std::string::npos);
  EXPECT_TRUE(validate_json(tree, Json::parse("[[[]],[]]")).is_ok());
}

TEST(JsonSchemaTest, TheKernelToolSchemasAreFullySupported) {
  for (KernelTool tool : {KernelTool::kEvaluate, KernelTool::kCompare, KernelTool::kValidate}) {
    EXPECT_TRUE(check_supported_schema(kernel_tool_input_schema(tool)).is_ok());
  }
  EXPECT_TRUE(check_supported_schema(job_view_schema()).is_ok());
  EXPECT_TRUE(check_supported_schema(server_stats_schema()).is_ok());
  EXPECT_TRUE(check_supported_schema(job_status_input_schema()).is_ok());
}

TEST(JsonSchemaTest, KernelToolSchemaChecksNestedIoContracts) {
  const Json& schema = kernel_tool_input_schema(KernelTool::kCompare);
  Json args = {
      {"ref_kernel_source", "x"},
      {"ref_kernel_type", "torch"},
      {"custom_kernel_source", "y"},
      {"custom_kernel_type", "triton"},
      {"custom_kernel_io", {{"args", Json::array({{{"name", "x"}, {"role", "sideways"}}})}}}};
  Status s = validate_json(schema, args);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.field_path(), "custom_kernel_io.args[0].role");
  args["custom_kernel_io"]["args"][0]["role"] = "output";
  args["custom_kernel_type"] = "julia";
  EXPECT_EQ(validate_json(schema, args).field_path(), "custom_kernel_type");
}

// Issue #37: an MCP client's empty strings are refused naming the argument.
TEST(JsonSchemaTest, KernelToolSchemaRefusesEmptyStrings) {
  const Json& schema = kernel_tool_input_schema(KernelTool::kEvaluate);
  Json args = {
      {"kernel_source", "x"},
      {"kernel_type", "triton"},
      {"io_contract",
       {{"args",
         Json::array({{{"name", "x"}, {"tensor_spec", {{"shape", {4}}, {"dtype", ""}}}}})}}}};
  Status s = validate_json(schema, args);
  EXPECT_EQ(s.field_path(), "io_contract.args[0].tensor_spec.dtype");
  EXPECT_EQ(s.message().rfind("must not be empty", 0), 0u) << s.to_string();
  args["io_contract"]["args"][0]["tensor_spec"]["dtype"] = "float32";
  args["kernel_type"] = "";
  s = validate_json(schema, args);
  EXPECT_EQ(s.field_path(), "kernel_type");
  EXPECT_EQ(s.message().rfind("must not be empty", 0), 0u) << s.to_string();
  args["kernel_type"] = "triton";
  args["kernel_source"] = "";
  EXPECT_EQ(validate_json(schema, args).to_string(), "kernel_source: must not be empty");
}

}  // namespace
}  // namespace kforge::frontends::mcp
