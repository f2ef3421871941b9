// JSON value type and helpers shared by every module.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kforge/common/status.h"

namespace kforge {

using Json = nlohmann::json;

// Builds JSON paths for error messages: JsonPath("kernel").key("io").index(2) ->
// "kernel.io[2]". The root path is empty; keys of the root have no leading dot.
class JsonPath {
 public:
  JsonPath() = default;
  explicit JsonPath(std::string path) : path_(std::move(path)) {}

  JsonPath key(std::string_view name) const;
  JsonPath index(size_t i) const;
  const std::string& str() const { return path_; }
  // The path for messages: "<root>" where the path is empty.
  std::string display() const { return path_.empty() ? std::string("<root>") : path_; }

 private:
  std::string path_;
};

// Nesting limits for JSON from outside the process (request bodies, MCP messages, worker
// frames, replies of a forwarded server). Every such text is parsed by parse_json, which
// refuses a value nested deeper than the limit while parsing (arrays and objects count one
// level each: `[[1]]` has depth 2), so no deep value is ever built: nlohmann::json copies,
// compares and serialises recursively, and a value nested 100k levels deep overflows the
// stack in any of them.
inline constexpr size_t kDefaultMaxJsonDepth = 64;
inline constexpr size_t kMaxJsonDepthCeiling = 1000;  // the largest limit that may be set

// The process-wide limit parse_json(text) applies; kDefaultMaxJsonDepth until set.
size_t max_json_depth();
// Sets it (`--max-json-depth`, at start-up); kInvalidArgument outside 1..kMaxJsonDepthCeiling.
Status set_max_json_depth(size_t depth);

// Parses text as JSON with the process-wide depth limit. A syntax error becomes
// kInvalidArgument "body is not valid JSON: <reason with the byte offset>"; a value nested
// deeper than the limit becomes kInvalidArgument "body is not valid JSON: nested deeper than
// the limit of N levels (--max-json-depth)". Thread-safe.
StatusOr<Json> parse_json(std::string_view text);
// The same with an explicit limit (1..kMaxJsonDepthCeiling).
StatusOr<Json> parse_json(std::string_view text, size_t max_depth);

// How deeply `value` nests (a scalar is 0, `[]` is 1), counted without recursion, so it is
// safe on values of any depth.
size_t json_depth(const Json& value);

// Name of a JSON value's type for messages ("string", "object", "integer", ...).
std::string_view json_type_name(const Json& value);

}  // namespace kforge
