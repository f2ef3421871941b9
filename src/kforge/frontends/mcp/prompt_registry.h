// PromptRegistry: prompt templates (prompts/list, prompts/get), in registration order.
//
// Thread-safety: build before serving; afterwards only read (from any thread).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::frontends::mcp {

struct PromptArgument {
  std::string name;
  std::string description;
  bool required = false;
};

struct PromptSpec {
  std::string name;
  std::string title;
  std::string description;
  std::vector<PromptArgument> arguments;
};

// Returns the GetPromptResult ({description?, messages}) for string arguments.
using PromptGetter = std::function<StatusOr<Json>(const std::map<std::string, std::string>&)>;

class PromptRegistry {
 public:
  Status add(PromptSpec spec, PromptGetter getter);

  bool empty() const { return prompts_.empty(); }
  std::vector<Json> listings() const;
  const PromptSpec* find(std::string_view name) const;
  // kInvalidArgument for an unknown prompt, a missing required argument or a non-string one.
  StatusOr<Json> get(std::string_view name, const Json& arguments) const;

 private:
  struct Entry {
    PromptSpec spec;
    PromptGetter getter;
  };
  std::vector<Entry> prompts_;
};

}  // namespace kforge::frontends::mcp
