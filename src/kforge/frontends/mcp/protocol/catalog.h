// Catalog: everything one MCP server offers — identity, instructions, tools, resources,
// prompts and completions — and the capabilities that follow from it (only what is
// implemented is declared). The product catalog has the kernel tools (kernel_tools.h); the
// conformance fixtures (fixtures/) add their own entries to a separate catalog.
//
// Thread-safety: build before serving; afterwards only read (from any thread).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/frontends/mcp/protocol/prompt_registry.h"
#include "kforge/frontends/mcp/protocol/resource_registry.h"
#include "kforge/frontends/mcp/protocol/tool_registry.h"

namespace kforge::frontends::mcp {

struct ServerInfo {
  std::string name = "kforge";
  std::string title = "kforge GPU kernel evaluation server";
  std::string version = "dev";
  std::string description;   // 2025-11-25 serverInfo.description
  std::string instructions;  // InitializeResult.instructions: how to use the tools
};

// A method of an extension (e.g. skills/list), served to 2026-07-28 requests: answers through
// ctx (respond, respond_error).
using MethodHandler = std::function<void(RequestContext& ctx, const Json& params)>;

// completion/complete: returns {"completion": {"values": [...], ...}} for the request params.
using CompletionHandler = std::function<StatusOr<Json>(const Json& params)>;

struct Catalog {
  ServerInfo info;
  ToolRegistry tools;
  ResourceRegistry resources;
  PromptRegistry prompts;
  CompletionHandler completion;         // empty: no completions capability
  bool resource_subscriptions = false;  // resources/subscribe and unsubscribe are accepted
  // 2026-07-28: server/discover's capabilities.extensions (id -> settings), and the methods the
  // extensions add (served to 2026-07-28 requests only).
  Json extensions = Json::object();
  std::map<std::string, MethodHandler> extension_methods;

  // The InitializeResult capabilities: tools and logging always; resources, prompts and
  // completions when present.
  Json capabilities() const;
  // The InitializeResult serverInfo for `protocol_version`.
  Json server_info(std::string_view protocol_version) const;
};

}  // namespace kforge::frontends::mcp
