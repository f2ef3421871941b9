#include "kforge/common/json.h"

namespace kforge {

JsonPath JsonPath::key(std::string_view name) const {
  if (path_.empty()) return JsonPath(std::string(name));
  std::string p = path_;
  p += '.';
  p += name;
  return JsonPath(std::move(p));
}

JsonPath JsonPath::index(size_t i) const {
  return JsonPath(path_ + "[" + std::to_string(i) + "]");
}

StatusOr<Json> parse_json(std::string_view text) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    return invalid_argument(std::string("body is not valid JSON: ") + e.what());
  }
}

std::string_view json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "number";
    case Json::value_t::binary:
      return "binary";
    case Json::value_t::discarded:
      return "discarded";
  }
  return "unknown";
}

}  // namespace kforge
