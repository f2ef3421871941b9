// A number field of a JSON result, as the bench layer's reports read them.
#pragma once

#include <optional>

#include "kforge/common/json.h"

namespace kforge::bench {

// object[key] when `object` is an object and that member is a number; nullopt otherwise.
inline std::optional<double> json_number(const Json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace kforge::bench
