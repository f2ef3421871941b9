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
// A prompt that may need input from the client first (revision 2026-07-28's input_required
// results): it also sees the request's params (inputResponses, requestState) and returns a
// GetPromptResult or an InputRequiredResult ({"resultType": "input_required", ...}).
using InteractivePromptGetter = std::function<StatusOr<Json>(
    const std::map<std::string, std::string>&, const Json& request_params)>;

class PromptRegistry {
 public:
  Status add(PromptSpec spec, PromptGetter getter);
  Status add_interactive(PromptSpec spec, InteractivePromptGetter getter);

  bool empty() const { return prompts_.empty(); }
  std::vector<Json> listings() const;
  const PromptSpec* find(std::string_view name) const;
  // kInvalidArgument for an unknown prompt, a missing required argument or a non-string one.
  // `request_params`: the whole prompts/get params, for interactive prompts.
  StatusOr<Json> get(std::string_view name, const Json& arguments,
                     const Json& request_params = nullptr) const;

 private:
  struct Entry {
    PromptSpec spec;
    InteractivePromptGetter getter;
  };
  std::vector<Entry> prompts_;
};

}  // namespace kforge::frontends::mcp
