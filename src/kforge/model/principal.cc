#include "kforge/model/principal.h"

#include <algorithm>

namespace kforge::model {

std::string_view to_string(Role r) {
  switch (r) {
    case Role::kAnonymous:
      return "anonymous";
    case Role::kUser:
      return "user";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

std::optional<Role> role_from(std::string_view s) {
  for (Role r : {Role::kAnonymous, Role::kUser, Role::kAdmin}) {
    if (to_string(r) == s) return r;
  }
  return std::nullopt;
}

bool is_principal_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

}  // namespace kforge::model
