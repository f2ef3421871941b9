// Tools: what `tools/list` describes and `tools/call` runs.
//
// A tool is a ToolSpec (name, description, JSON Schemas, annotations) plus a handler. The
// dispatcher validates the call's arguments against `input_schema` (json_schema.h) before the
// handler runs, on the blocking executor, so a handler may block on disk but must not wait
// for a job: it finishes the ToolCall whenever the result is ready, from any thread.
//
// Results follow the MCP rules: tool failures and invalid arguments are results with
// `isError: true` and an actionable text; `structuredContent` (which must conform to
// `output_schema` when one is declared) comes with its JSON text copy for older clients.
//
// Example:
//   registry.add(ToolSpec{.name = "echo", ...}, [](std::shared_ptr<ToolCall> call) {
//     call->finish(ToolResult::text(call->arguments()["text"].get<std::string>()));
//   });
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kforge/common/json.h"
#include "kforge/frontends/mcp/protocol/request_context.h"

namespace kforge::frontends::mcp {

struct ToolSpec {
  std::string name;  // [a-zA-Z0-9_-]{1,64}
  std::string title;
  std::string description;
  Json input_schema;                  // {"type": "object", ...}
  std::optional<Json> output_schema;  // {"type": "object", ...} when results are structured
  Json annotations = Json::object();  // readOnlyHint, destructiveHint, idempotentHint, ...
  // Long-running: over HTTP the answer streams (SSE) from the start, with keep-alive comments.
  bool long_running = false;
  // When set, the call's arguments pass through it before they are validated against
  // `input_schema` (e.g. to accept older argument forms); it returns the arguments to use.
  std::function<Json(Json arguments)> normalize_arguments;
};

// The annotations of a tool that submits jobs: it changes state (a job), destroys nothing,
// is not idempotent (each call is a new job) and reaches nothing outside kforge.
Json job_tool_annotations();

struct ToolResult {
  Json content = Json::array();  // content blocks: text, image, audio, resource, ...
  std::optional<Json> structured;
  bool is_error = false;

  static ToolResult text(std::string text);
  static ToolResult error(std::string message);
  // `value` as structuredContent, preceded by a one-line `summary` text block (when not
  // empty) and followed by the JSON text copy.
  static ToolResult structured_value(Json value, std::string summary = {}, bool is_error = false);

  // The CallToolResult for `protocol_version` (structuredContent only from 2025-06-18 on).
  Json to_json(std::string_view protocol_version) const;
};

// One tools/call in progress.
class ToolCall {
 public:
  ToolCall(std::string tool_name, Json arguments, std::shared_ptr<RequestContext> context)
      : tool_name_(std::move(tool_name)),
        arguments_(std::move(arguments)),
        context_(std::move(context)) {}

  const std::string& tool_name() const { return tool_name_; }
  const Json& arguments() const { return arguments_; }
  RequestContext& context() const { return *context_; }
  const std::shared_ptr<RequestContext>& context_ptr() const { return context_; }

  // Answers the call (ignored after a cancel or a previous answer).
  void finish(const ToolResult& result) const;

 private:
  const std::string tool_name_;
  const Json arguments_;
  const std::shared_ptr<RequestContext> context_;
};

using ToolHandler = std::function<void(std::shared_ptr<ToolCall> call)>;

// The tool entry of tools/list for `protocol_version`.
Json tool_listing(const ToolSpec& spec, std::string_view protocol_version);

}  // namespace kforge::frontends::mcp
