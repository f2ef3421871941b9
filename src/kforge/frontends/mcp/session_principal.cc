#include "kforge/frontends/mcp/session_principal.h"

#include <string>

namespace kforge::frontends::mcp {

SessionOwner owner_of(const model::Principal& principal) {
  if (principal == model::Principal{}) return {};
  return {principal.name, std::string(model::to_string(principal.role))};
}

model::Principal principal_of(const Session& session) {
  const SessionOwner& owner = session.owner();
  if (owner == SessionOwner{}) return {};
  return {owner.name, model::role_from(owner.role).value_or(model::Role::kUser)};
}

}  // namespace kforge::frontends::mcp
