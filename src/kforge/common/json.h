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

// Parses text as JSON; a syntax error becomes kInvalidArgument with the byte offset.
StatusOr<Json> parse_json(std::string_view text);

// Name of a JSON value's type for messages ("string", "object", "integer", ...).
std::string_view json_type_name(const Json& value);

}  // namespace kforge
