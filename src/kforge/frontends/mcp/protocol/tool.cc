#include "kforge/frontends/mcp/protocol/tool.h"

#include "kforge/frontends/mcp/protocol/protocol.h"

namespace kforge::frontends::mcp {
namespace {

Json text_block(std::string text) {
  return Json{{"type", "text"}, {"text", std::move(text)}};
}

}  // namespace

Json job_tool_annotations() {
  return Json{{"readOnlyHint", false},
              {"destructiveHint", false},
              {"idempotentHint", false},
              {"openWorldHint", false}};
}

ToolResult ToolResult::text(std::string text) {
  ToolResult r;
  r.content.push_back(text_block(std::move(text)));
  return r;
}

ToolResult ToolResult::error(std::string message) {
  ToolResult r = text(std::move(message));
  r.is_error = true;
  return r;
}

ToolResult ToolResult::structured_value(Json value, std::string summary, bool is_error) {
  ToolResult r;
  if (!summary.empty()) r.content.push_back(text_block(std::move(summary)));
  r.content.push_back(text_block(value.dump(-1, ' ', false, Json::error_handler_t::replace)));
  r.structured = std::move(value);
  r.is_error = is_error;
  return r;
}

Json ToolResult::to_json(std::string_view protocol_version) const {
  Json j = {{"content", content}};
  if (structured && structured_content_allowed(protocol_version)) {
    j["structuredContent"] = *structured;
  }
  if (is_error) j["isError"] = true;
  return j;
}

void ToolCall::finish(const ToolResult& result) const {
  context_->respond(result.to_json(context_->protocol_version()));
}

Json tool_listing(const ToolSpec& spec, std::string_view protocol_version) {
  const bool modern = structured_content_allowed(protocol_version);
  Json j = {{"name", spec.name}, {"description", spec.description}};
  if (!spec.title.empty() && modern) j["title"] = spec.title;
  j["inputSchema"] = spec.input_schema;
  if (spec.output_schema && modern) j["outputSchema"] = *spec.output_schema;
  if (!spec.annotations.empty()) {
    Json annotations = spec.annotations;
    if (!spec.title.empty()) annotations["title"] = spec.title;
    j["annotations"] = std::move(annotations);
  }
  return j;
}

}  // namespace kforge::frontends::mcp
