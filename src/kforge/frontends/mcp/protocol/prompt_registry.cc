#include "kforge/frontends/mcp/protocol/prompt_registry.h"

namespace kforge::frontends::mcp {

Status PromptRegistry::add(PromptSpec spec, PromptGetter getter) {
  if (!getter) return invalid_argument("a prompt needs a name and a getter");
  return add_interactive(
      std::move(spec),
      [getter = std::move(getter)](const std::map<std::string, std::string>& args,
                                   const Json& /*request_params*/) { return getter(args); });
}

Status PromptRegistry::add_interactive(PromptSpec spec, InteractivePromptGetter getter) {
  if (spec.name.empty() || !getter) return invalid_argument("a prompt needs a name and a getter");
  if (find(spec.name) != nullptr) {
    return Status(ErrorCode::kAlreadyExists, "prompt '" + spec.name + "' is already registered");
  }
  prompts_.push_back(Entry{std::move(spec), std::move(getter)});
  return Status::ok();
}

std::vector<Json> PromptRegistry::listings() const {
  std::vector<Json> out;
  for (const Entry& e : prompts_) {
    Json j = {{"name", e.spec.name}};
    if (!e.spec.title.empty()) j["title"] = e.spec.title;
    if (!e.spec.description.empty()) j["description"] = e.spec.description;
    Json args = Json::array();
    for (const PromptArgument& a : e.spec.arguments) {
      Json arg = {{"name", a.name}, {"required", a.required}};
      if (!a.description.empty()) arg["description"] = a.description;
      args.push_back(std::move(arg));
    }
    j["arguments"] = std::move(args);
    out.push_back(std::move(j));
  }
  return out;
}

const PromptSpec* PromptRegistry::find(std::string_view name) const {
  for (const Entry& e : prompts_) {
    if (e.spec.name == name) return &e.spec;
  }
  return nullptr;
}

StatusOr<Json> PromptRegistry::get(std::string_view name, const Json& arguments,
                                   const Json& request_params) const {
  const Entry* entry = nullptr;
  for (const Entry& e : prompts_) {
    if (e.spec.name == name) entry = &e;
  }
  if (entry == nullptr)
    return invalid_argument("unknown prompt '" + std::string(name) + "'", "name");
  if (!arguments.is_null() && !arguments.is_object()) {
    return invalid_argument("must be an object of strings", "arguments");
  }
  std::map<std::string, std::string> args;
  if (arguments.is_object()) {
    for (const auto& [key, value] : arguments.items()) {
      if (!value.is_string()) return invalid_argument("must be a string", "arguments." + key);
      args[key] = value.get<std::string>();
    }
  }
  for (const PromptArgument& a : entry->spec.arguments) {
    if (a.required && args.count(a.name) == 0) {
      return invalid_argument("is required by prompt '" + entry->spec.name + "'",
                              "arguments." + a.name);
    }
  }
  return entry->getter(args, request_params);
}

}  // namespace kforge::frontends::mcp
