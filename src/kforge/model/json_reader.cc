#include "kforge/model/json_reader.h"

#include <cmath>
#include <limits>

namespace kforge::model::reader {

Status field_error(const JsonPath& path, std::string message) {
  return invalid_argument(std::move(message), path.display());
}

Status expect_object(const Json& j, const JsonPath& path) {
  if (!j.is_object()) {
    return field_error(path, "must be an object, got " + std::string(json_type_name(j)));
  }
  return Status::ok();
}

Status require_members(const Json& obj, const JsonPath& path,
                       std::initializer_list<std::string_view> keys, std::string_view why) {
  for (std::string_view key : keys) {
    if (member(obj, key) == nullptr) {
      return field_error(path.key(key),
                         why.empty() ? "is required" : "is required (" + std::string(why) + ")");
    }
  }
  return Status::ok();
}

const Json* member(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

StatusOr<std::string> read_string(const Json& obj, std::string_view key, const JsonPath& path,
                                  bool required) {
  const Json* v = member(obj, key);
  if (v == nullptr) {
    if (required) return field_error(path.key(key), "is required");
    return std::string();
  }
  if (!v->is_string()) {
    return field_error(path.key(key), "must be a string, got " + std::string(json_type_name(*v)));
  }
  return v->get<std::string>();
}

StatusOr<std::string> read_nonempty_string(const Json& obj, std::string_view key,
                                           const JsonPath& path) {
  KF_ASSIGN_OR_RETURN(std::string s, read_string(obj, key, path, true));
  if (s.empty()) return field_error(path.key(key), "must not be empty");
  return s;
}

StatusOr<std::optional<double>> read_number(const Json& obj, std::string_view key,
                                            const JsonPath& path, double min, double max) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) {
    return field_error(path.key(key), "must be a number, got " + std::string(json_type_name(*v)));
  }
  double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    return field_error(path.key(key), "must be between " + Json(min).dump() + " and " +
                                          Json(max).dump() + ", got " + v->dump());
  }
  return std::optional<double>(d);
}

StatusOr<std::optional<int64_t>> read_int(const Json& obj, std::string_view key,
                                          const JsonPath& path, int64_t min, int64_t max) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<int64_t>();
  int64_t value = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
      return field_error(path.key(key), "must be at most " + std::to_string(max));
    }
    value = v->get<int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    value = static_cast<int64_t>(v->get<double>());  // 5.0 is accepted as 5
  } else {
    return field_error(path.key(key), "must be an integer, got " + std::string(json_type_name(*v)));
  }
  if (value < min || value > max) {
    return field_error(path.key(key), "must be between " + std::to_string(min) + " and " +
                                          std::to_string(max) + ", got " + std::to_string(value));
  }
  return std::optional<int64_t>(value);
}

// A non-negative integer of up to 64 bits (the full range of uint64_t); never wraps: -1 or
// 2^64 is an error naming the field.
StatusOr<std::optional<uint64_t>> read_uint64(const Json& obj, std::string_view key,
                                              const JsonPath& path) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<uint64_t>();
  const std::string range =
      "must be an integer between 0 and " + std::to_string(std::numeric_limits<uint64_t>::max());
  if (v->is_number_unsigned()) return std::optional<uint64_t>(v->get<uint64_t>());
  if (v->is_number_integer()) {
    const int64_t i = v->get<int64_t>();
    if (i < 0) return field_error(path.key(key), range + ", got " + std::to_string(i));
    return std::optional<uint64_t>(static_cast<uint64_t>(i));
  }
  return field_error(
      path.key(key),
      range + ", got " + (v->is_number() ? v->dump() : std::string(json_type_name(*v))));
}

// A JSON integer that fits int64_t (a number_unsigned above INT64_MAX does not).
bool fits_int64(const Json& v) {
  return v.is_number_integer() &&
         (!v.is_number_unsigned() ||
          v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

StatusOr<std::optional<bool>> read_bool(const Json& obj, std::string_view key,
                                        const JsonPath& path) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) {
    return field_error(path.key(key), "must be a boolean, got " + std::string(json_type_name(*v)));
  }
  return std::optional<bool>(v->get<bool>());
}

StatusOr<std::vector<int64_t>> read_shape(const Json& obj, std::string_view key,
                                          const JsonPath& path, int max_rank) {
  const Json* v = member(obj, key);
  JsonPath p = path.key(key);
  if (v == nullptr) return field_error(p, "is required");
  if (!v->is_array()) return field_error(p, "must be a list of non-negative integers");
  if (v->size() > static_cast<size_t>(max_rank)) {
    return field_error(p, "rank " + std::to_string(v->size()) + " exceeds the limit of " +
                              std::to_string(max_rank));
  }
  std::vector<int64_t> shape;
  for (const auto& d : *v) {
    // fits_int64 first: 2^63 and above would read as negative through get<int64_t>.
    if (!fits_int64(d) || d.get<int64_t>() < 0) {
      return field_error(p, "must be a list of non-negative integers");
    }
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

}  // namespace kforge::model::reader
