#include "kforge/frontends/mcp/protocol/tool_registry.h"

#include <algorithm>

#include "kforge/frontends/mcp/protocol/json_schema.h"

namespace kforge::frontends::mcp {
namespace {

Status check_object_schema(const std::string& tool, const char* which, const Json& schema) {
  auto type = schema.is_object() ? schema.find("type") : schema.end();
  if (type == schema.end() || *type != "object") {
    return invalid_argument("tool '" + tool + "': " + which + " must have \"type\": \"object\"");
  }
  Status supported = check_supported_schema(schema);
  if (!supported.is_ok()) {
    return supported.with_context("tool '" + tool + "': " + which);
  }
  return Status::ok();
}

}  // namespace

bool ToolRegistry::is_valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

Status ToolRegistry::add(ToolSpec spec, ToolHandler handler) {
  if (!is_valid_name(spec.name)) {
    return invalid_argument("tool name '" + spec.name + "' must match [a-zA-Z0-9_-]{1,64}");
  }
  if (find(spec.name) != nullptr) {
    return Status(ErrorCode::kAlreadyExists, "tool '" + spec.name + "' is already registered");
  }
  if (spec.description.empty()) {
    return invalid_argument("tool '" + spec.name + "' needs a description");
  }
  KF_RETURN_IF_ERROR(check_object_schema(spec.name, "inputSchema", spec.input_schema));
  if (spec.output_schema) {
    KF_RETURN_IF_ERROR(check_object_schema(spec.name, "outputSchema", *spec.output_schema));
  }
  if (!handler) return invalid_argument("tool '" + spec.name + "' has no handler");
  tools_.push_back(Tool{std::move(spec), std::move(handler)});
  return Status::ok();
}

const Tool* ToolRegistry::find(std::string_view name) const {
  for (const Tool& tool : tools_) {
    if (tool.spec.name == name) return &tool;
  }
  return nullptr;
}

}  // namespace kforge::frontends::mcp
