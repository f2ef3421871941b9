#include "kforge/workbench/knowledge.h"

#include <algorithm>

#include "kforge/workbench/embedded_files.h"

namespace kforge::workbench {
namespace {

// Fields every op of torch_ops.json must have, with their JSON types.
constexpr std::pair<const char*, Json::value_t> kOpFields[] = {
    {"torch", Json::value_t::string},          {"signature", Json::value_t::string},
    {"definition", Json::value_t::string},     {"shapes", Json::value_t::string},
    {"dtypes", Json::value_t::string},         {"bound", Json::value_t::string},
    {"bound_reason", Json::value_t::string},   {"bytes", Json::value_t::string},
    {"flops", Json::value_t::string},          {"pitfalls", Json::value_t::array},
    {"optimizations", Json::value_t::array},   {"template", Json::value_t::string},
    {"reference_code", Json::value_t::string}, {"test_input_code", Json::value_t::string},
};

constexpr const char* kTemplateFields[] = {"title", "description",     "file",
                                           "entry", "test_input_code", "reference_code"};

std::string fold(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c >= 'A' && c <= 'Z') {
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if (c == '-' || c == ' ' || c == '.') {
      out.push_back('_');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Status malformed(const std::string& file, const std::string& what) {
  return internal_error("embedded knowledge base: " + file + ": " + what);
}

}  // namespace

StatusOr<std::shared_ptr<const Knowledge>> Knowledge::load() {
  std::shared_ptr<Knowledge> k(new Knowledge());
  std::map<std::string, std::string, std::less<>> files;
  for (const EmbeddedFile& f : embedded_files())
    files.emplace(std::string(f.path), std::string(f.content));
  auto need = [&](const std::string& path) -> StatusOr<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return malformed(path, "not embedded");
    return it->second;
  };
  KF_ASSIGN_OR_RETURN(k->overview_, need("knowledge/overview.md"));
  KF_ASSIGN_OR_RETURN(k->triton_syntax_, need("knowledge/triton_syntax.md"));
  KF_ASSIGN_OR_RETURN(k->interpreter_compat_, need("kernels/interpreter_compat.py"));

  KF_ASSIGN_OR_RETURN(std::string ops_text, need("knowledge/torch_ops.json"));
  StatusOr<Json> ops = parse_json(ops_text);
  if (!ops.is_ok()) return malformed("knowledge/torch_ops.json", ops.status().message());
  if (!ops->is_object() || ops->empty()) return malformed("knowledge/torch_ops.json", "no ops");
  for (const auto& [name, op] : ops->items()) {
    if (name.starts_with("_")) continue;  // comments
    for (const auto& [field, type] : kOpFields) {
      if (!op.contains(field) || op[field].type() != type) {
        return malformed("knowledge/torch_ops.json", name + "." + field + " is missing or not a " +
                                                         std::string(json_type_name(Json(type))));
      }
    }
    k->ops_[name] = op;
  }

  KF_ASSIGN_OR_RETURN(std::string templates_text, need("knowledge/templates/templates.json"));
  StatusOr<Json> templates = parse_json(templates_text);
  if (!templates.is_ok() || !templates->is_object()) {
    return malformed("knowledge/templates/templates.json",
                     templates.is_ok() ? "not an object" : templates.status().message());
  }
  for (const auto& [pattern, t] : templates->items()) {
    if (pattern.starts_with("_")) continue;
    for (const char* field : kTemplateFields) {
      if (!t.contains(field) || !t[field].is_string()) {
        return malformed("knowledge/templates/templates.json",
                         pattern + "." + field + " is missing or not a string");
      }
    }
    KernelTemplate kt;
    kt.pattern = pattern;
    kt.title = t["title"];
    kt.description = t["description"];
    kt.file = t["file"];
    kt.entry = t["entry"];
    kt.test_input_code = t["test_input_code"];
    kt.reference_code = t["reference_code"];
    KF_ASSIGN_OR_RETURN(kt.source, need(kt.file));
    if (kt.entry != "solve") {
      kt.source += "\n\n# kforge workbench: the execution tools call solve(*args, **kwargs).\n";
      kt.source += "solve = " + kt.entry + "\n";
    }
    k->templates_.push_back(std::move(kt));
  }
  for (const auto& [name, op] : k->ops_.items()) {
    if (!k->find_template(op["template"].get<std::string>())) {
      return malformed("knowledge/torch_ops.json",
                       name + ".template names no template of templates.json");
    }
  }
  return std::shared_ptr<const Knowledge>(std::move(k));
}

std::string Knowledge::op_name(std::string_view name) const {
  std::string key = fold(name);
  if (ops_.contains(key)) return key;
  for (const auto& [op_name, op] : ops_.items()) {
    for (const auto& alias : op.value("aliases", Json::array())) {
      if (alias.is_string() && fold(alias.get<std::string>()) == key) return op_name;
    }
  }
  return "";
}

const Json* Knowledge::op(std::string_view name) const {
  const std::string key = op_name(name);
  if (key.empty()) return nullptr;
  return &ops_.at(key);
}

std::vector<std::string> Knowledge::op_names() const {
  std::vector<std::string> out;
  for (const auto& [name, op] : ops_.items())
    out.push_back(name);
  return out;
}

const KernelTemplate* Knowledge::find_template(std::string_view pattern) const {
  const std::string key = fold(pattern);
  for (const auto& t : templates_) {
    if (t.pattern == key) return &t;
  }
  return nullptr;
}

std::optional<std::string_view> Knowledge::file(std::string_view path) const {
  static const std::vector<EmbeddedFile> files = embedded_files();
  for (const auto& f : files) {
    if (f.path == path) return f.content;
  }
  return std::nullopt;
}

}  // namespace kforge::workbench
