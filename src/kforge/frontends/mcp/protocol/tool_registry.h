// ToolRegistry: the tools a server offers, in registration order (tools/list is
// deterministic). Registration enforces what clients rely on:
// - names match [a-zA-Z0-9_-]{1,64} (the spec allows dots and slashes too, but Claude
//   clients, Codex and others reject them, and one bad name hides every tool);
// - `inputSchema` (and `outputSchema`, when given) is an object schema the validator fully
//   supports (json_schema.h), so what is advertised is what is checked.
//
// Thread-safety: build before serving; afterwards only read (from any thread).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/frontends/mcp/protocol/tool.h"

namespace kforge::frontends::mcp {

struct Tool {
  ToolSpec spec;
  ToolHandler handler;
};

class ToolRegistry {
 public:
  // kInvalidArgument for a bad name or schema (naming the tool), kAlreadyExists for a
  // duplicate name.
  Status add(ToolSpec spec, ToolHandler handler);

  const Tool* find(std::string_view name) const;
  const std::vector<Tool>& tools() const { return tools_; }
  bool empty() const { return tools_.empty(); }

  // True for names clients accept: [a-zA-Z0-9_-]{1,64}.
  static bool is_valid_name(std::string_view name);

 private:
  std::vector<Tool> tools_;
};

}  // namespace kforge::frontends::mcp
