#include "kforge/frontends/mcp/protocol/json_schema.h"

#include <cmath>
#include <set>
#include <string>

namespace kforge::frontends::mcp {
namespace {

const std::set<std::string, std::less<>>& annotation_keywords() {
  // x-mcp-header (SEP-2243) names the HTTP header that mirrors the argument; the transport
  // checks it (http_headers.h), the value validation does not.
  static const std::set<std::string, std::less<>> keys = {
      "title",  "description",  "default", "examples", "$schema",
      "format", "x-mcp-header", "$anchor", "$comment"};
  return keys;
}

const std::set<std::string, std::less<>>& validation_keywords() {
  static const std::set<std::string, std::less<>> keys = {"type",
                                                          "enum",
                                                          "const",
                                                          "properties",
                                                          "required",
                                                          "items",
                                                          "minimum",
                                                          "maximum",
                                                          "exclusiveMinimum",
                                                          "exclusiveMaximum",
                                                          "minLength",
                                                          "maxLength",
                                                          "minItems",
                                                          "maxItems",
                                                          "additionalProperties",
                                                          "$defs",
                                                          "$ref",
                                                          "anyOf",
                                                          "allOf",
                                                          "if",
                                                          "then",
                                                          "else"};
  return keys;
}

const std::set<std::string, std::less<>>& type_names() {
  static const std::set<std::string, std::less<>> names = {"null",   "boolean", "object", "array",
                                                           "number", "integer", "string"};
  return names;
}

std::string where(const JsonPath& path) {
  return path.str().empty() ? std::string("arguments") : path.str();
}

Status fail(const JsonPath& path, std::string reason) {
  return invalid_argument(std::move(reason), where(path));
}

bool is_integral(const Json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

bool has_type(const Json& value, std::string_view type) {
  if (type == "null") return value.is_null();
  if (type == "boolean") return value.is_boolean();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "integer") return is_integral(value);
  return false;
}

std::string join_quoted(const Json& values) {
  std::string out;
  for (const auto& v : values) {
    if (!out.empty()) out += ", ";
    out += v.dump();
  }
  return out;
}

// JSON equality with 1 == 1.0, as JSON Schema compares numbers by value.
bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

// Bounds the recursion of both walks below: each level is one level of the schema (or one
// $ref hop), never more than the value's own depth, so only a schema that nests this deep or
// a $ref cycle can reach it.
constexpr int kMaxWalkDepth = 128;

Status too_deep(const JsonPath& path) {
  return fail(path, "is nested too deeply to validate (more than " + std::to_string(kMaxWalkDepth) +
                        " schema levels or a $ref cycle)");
}

Status validate_at(const Json& root, const Json& schema, const Json& value, const JsonPath& path,
                   int depth);

// The schema a local reference ("#/$defs/<name>") points to in `root`, or nullptr.
const Json* resolve_ref(const Json& root, const Json& ref) {
  constexpr std::string_view kPrefix = "#/$defs/";
  if (!ref.is_string()) return nullptr;
  std::string_view text = ref.get_ref<const std::string&>();
  if (text.substr(0, kPrefix.size()) != kPrefix) return nullptr;
  auto defs = root.find("$defs");
  if (defs == root.end() || !defs->is_object()) return nullptr;
  auto target = defs->find(std::string(text.substr(kPrefix.size())));
  return target == defs->end() ? nullptr : &*target;
}

Status check_type(const Json& schema, const Json& value, const JsonPath& path) {
  auto type = schema.find("type");
  if (type == schema.end()) return Status::ok();
  std::string expected;
  if (type->is_string()) {
    if (has_type(value, type->get<std::string>())) return Status::ok();
    expected = type->get<std::string>();
  } else {
    for (const auto& t : *type) {
      if (has_type(value, t.get<std::string>())) return Status::ok();
      if (!expected.empty()) expected += " or ";
      expected += t.get<std::string>();
    }
  }
  const char* article =
      (expected[0] == 'a' || expected[0] == 'i' || expected[0] == 'o') ? "an" : "a";
  return fail(path, std::string("must be ") + article + " " + expected + ", got " +
                        std::string(json_type_name(value)));
}

Status check_number(const Json& schema, const Json& value, const JsonPath& path) {
  if (!value.is_number()) return Status::ok();
  double v = value.get<double>();
  if (auto it = schema.find("minimum"); it != schema.end() && v < it->get<double>()) {
    return fail(path, "must be at least " + it->dump() + ", got " + value.dump());
  }
  if (auto it = schema.find("maximum"); it != schema.end() && v > it->get<double>()) {
    return fail(path, "must be at most " + it->dump() + ", got " + value.dump());
  }
  if (auto it = schema.find("exclusiveMinimum"); it != schema.end() && v <= it->get<double>()) {
    return fail(path, "must be greater than " + it->dump() + ", got " + value.dump());
  }
  if (auto it = schema.find("exclusiveMaximum"); it != schema.end() && v >= it->get<double>()) {
    return fail(path, "must be less than " + it->dump() + ", got " + value.dump());
  }
  return Status::ok();
}

Status check_sizes(const Json& schema, const Json& value, const JsonPath& path) {
  if (value.is_string()) {
    size_t n = value.get_ref<const std::string&>().size();
    if (auto it = schema.find("minLength"); it != schema.end() && n < it->get<size_t>()) {
      return fail(path, it->get<size_t>() == 1
                            ? std::string("must not be empty")
                            : "must have at least " + it->dump() + " characters");
    }
    if (auto it = schema.find("maxLength"); it != schema.end() && n > it->get<size_t>()) {
      return fail(path, "must have at most " + it->dump() + " characters");
    }
  }
  if (value.is_array()) {
    if (auto it = schema.find("minItems"); it != schema.end() && value.size() < it->get<size_t>()) {
      return fail(path, "must have at least " + it->dump() + " items");
    }
    if (auto it = schema.find("maxItems"); it != schema.end() && value.size() > it->get<size_t>()) {
      return fail(path, "must have at most " + it->dump() + " items");
    }
  }
  return Status::ok();
}

Status check_object(const Json& root, const Json& schema, const Json& value, const JsonPath& path,
                    int depth) {
  if (!value.is_object()) return Status::ok();
  static const Json kNoProperties = Json::object();
  auto props_it = schema.find("properties");
  const Json& props = props_it == schema.end() ? kNoProperties : *props_it;
  auto additional = schema.find("additionalProperties");
  for (const auto& [key, member] : value.items()) {
    if (props.contains(key)) continue;
    if (additional == schema.end() || (additional->is_boolean() && additional->get<bool>())) {
      continue;
    }
    if (additional->is_boolean()) {
      std::string allowed;
      for (const auto& [name, unused] : props.items()) {
        allowed += allowed.empty() ? name : ", " + name;
      }
      return fail(path.key(key), "is not a known field" +
                                     (allowed.empty() ? std::string(" (none are accepted)")
                                                      : " (expected one of: " + allowed + ")"));
    }
    KF_RETURN_IF_ERROR(validate_at(root, *additional, member, path.key(key), depth + 1));
  }
  if (auto required = schema.find("required"); required != schema.end()) {
    for (const auto& name : *required) {
      const std::string& key = name.get_ref<const std::string&>();
      if (!value.contains(key)) return fail(path.key(key), "is required");
    }
  }
  for (const auto& [key, sub] : props.items()) {
    auto member = value.find(key);
    if (member == value.end()) continue;
    KF_RETURN_IF_ERROR(validate_at(root, sub, *member, path.key(key), depth + 1));
  }
  return Status::ok();
}

Status check_schema_at(const Json& root, const Json& schema, const JsonPath& path, int depth);

Status check_schema_map(const Json& root, const Json& map, const JsonPath& path, int depth) {
  if (!map.is_object()) return fail(path, "must be an object of schemas");
  for (const auto& [key, sub] : map.items()) {
    KF_RETURN_IF_ERROR(check_schema_at(root, sub, path.key(key), depth + 1));
  }
  return Status::ok();
}

Status check_schema_at(const Json& root, const Json& schema, const JsonPath& path, int depth) {
  if (depth > kMaxWalkDepth) return too_deep(path);
  if (schema.is_boolean()) return Status::ok();
  if (!schema.is_object()) return fail(path, "a schema must be an object or a boolean");
  for (const auto& [key, value] : schema.items()) {
    if (annotation_keywords().count(key) != 0) continue;
    if (validation_keywords().count(key) == 0) {
      return fail(path.key(key), "schema keyword is not supported by kforge's validator");
    }
    if (key == "type") {
      bool ok = value.is_string() ? type_names().count(value.get<std::string>()) != 0
                                  : value.is_array() && !value.empty();
      for (const auto& t : value.is_array() ? value : Json::array()) {
        ok = ok && t.is_string() && type_names().count(t.get<std::string>()) != 0;
      }
      if (!ok) return fail(path.key(key), "must name JSON Schema types");
    } else if (key == "enum") {
      if (!value.is_array() || value.empty()) return fail(path.key(key), "must be a list");
    } else if (key == "properties" || key == "$defs") {
      KF_RETURN_IF_ERROR(check_schema_map(root, value, path.key(key), depth));
    } else if (key == "$ref") {
      if (resolve_ref(root, value) == nullptr) {
        return fail(path.key(key), "must be a local reference \"#/$defs/<name>\" that exists");
      }
    } else if (key == "required") {
      if (!value.is_array()) return fail(path.key(key), "must be a list of names");
      for (const auto& n : value) {
        if (!n.is_string()) return fail(path.key(key), "must be a list of names");
      }
    } else if (key == "items" || key == "additionalProperties") {
      KF_RETURN_IF_ERROR(check_schema_at(root, value, path.key(key), depth + 1));
    } else if (key == "if" || key == "then" || key == "else") {
      KF_RETURN_IF_ERROR(check_schema_at(root, value, path.key(key), depth + 1));
    } else if (key == "anyOf" || key == "allOf") {
      if (!value.is_array() || value.empty())
        return fail(path.key(key), "must be a list of schemas");
      for (size_t i = 0; i < value.size(); ++i) {
        KF_RETURN_IF_ERROR(check_schema_at(root, value[i], path.key(key).index(i), depth + 1));
      }
    } else if (key != "const") {
      bool is_count =
          key.find("Length") != std::string::npos || key.find("Items") != std::string::npos;
      bool ok =
          is_count ? value.is_number_integer() && value.get<int64_t>() >= 0 : value.is_number();
      if (!ok) {
        return fail(path.key(key),
                    is_count ? "must be a non-negative integer" : "must be a number");
      }
    }
  }
  return Status::ok();
}

Status validate_at(const Json& root, const Json& schema, const Json& value, const JsonPath& path,
                   int depth) {
  if (depth > kMaxWalkDepth) return too_deep(path);
  if (schema.is_boolean()) {
    return schema.get<bool>() ? Status::ok() : fail(path, "is not allowed");
  }
  if (auto ref = schema.find("$ref"); ref != schema.end()) {
    const Json* target = resolve_ref(root, *ref);
    if (target == nullptr) return internal_error("unresolvable $ref " + ref->dump());
    KF_RETURN_IF_ERROR(validate_at(root, *target, value, path, depth + 1));
  }
  KF_RETURN_IF_ERROR(check_type(schema, value, path));
  if (auto any = schema.find("anyOf"); any != schema.end()) {
    std::string reasons;
    bool matched = false;
    for (const Json& alternative : *any) {
      Status s = validate_at(root, alternative, value, path, depth + 1);
      if (s) {
        matched = true;
        break;
      }
      reasons += (reasons.empty() ? "" : "; or ") + s.field_path() + ": " + s.message();
    }
    if (!matched) return fail(path, "matches none of the allowed forms (" + reasons + ")");
  }
  if (auto all = schema.find("allOf"); all != schema.end()) {
    for (const Json& part : *all) {
      KF_RETURN_IF_ERROR(validate_at(root, part, value, path, depth + 1));
    }
  }
  if (auto cond = schema.find("if"); cond != schema.end()) {
    // if/then/else: `then` applies when the value matches `if`, `else` when it does not.
    const bool matches = validate_at(root, *cond, value, path, depth + 1).is_ok();
    auto branch = schema.find(matches ? "then" : "else");
    if (branch != schema.end()) {
      KF_RETURN_IF_ERROR(validate_at(root, *branch, value, path, depth + 1));
    }
  }
  if (auto it = schema.find("const"); it != schema.end() && !json_equal(*it, value)) {
    return fail(path, "must be " + it->dump());
  }
  if (auto it = schema.find("enum"); it != schema.end()) {
    bool found = false;
    for (const auto& allowed : *it) {
      found = found || json_equal(allowed, value);
    }
    if (!found && value.is_string() && value.get_ref<const std::string&>().empty()) {
      return fail(path, "must not be empty (expected one of " + join_quoted(*it) + ")");
    }
    if (!found) return fail(path, "must be one of " + join_quoted(*it) + ", got " + value.dump());
  }
  KF_RETURN_IF_ERROR(check_number(schema, value, path));
  KF_RETURN_IF_ERROR(check_sizes(schema, value, path));
  KF_RETURN_IF_ERROR(check_object(root, schema, value, path, depth));
  if (auto items = schema.find("items"); items != schema.end() && value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      KF_RETURN_IF_ERROR(validate_at(root, *items, value[i], path.index(i), depth + 1));
    }
  }
  return Status::ok();
}

}  // namespace

Status check_supported_schema(const Json& schema) {
  return check_schema_at(schema, schema, JsonPath("schema"), 0);
}

Status validate_json(const Json& schema, const Json& value, const JsonPath& path) {
  return validate_at(schema, schema, value, path, 0);
}

}  // namespace kforge::frontends::mcp
