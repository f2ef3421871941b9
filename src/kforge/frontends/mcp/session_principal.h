// The principal (model/principal.h) an MCP session acts for, and back: the protocol's
// sessions carry a SessionOwner, labels it only compares; the product's tools and transports
// map them to and from the principal whose jobs a caller may see.
//
// Example:
//   auto session = store.create(request.client, owner_of(request.principal));
//   auto job = jobs::get_visible(service, id, principal_of(ctx.session()));
#pragma once

#include "kforge/frontends/mcp/protocol/session.h"
#include "kforge/model/principal.h"

namespace kforge::frontends::mcp {

// The anonymous principal is the empty owner (a session made without one).
SessionOwner owner_of(const model::Principal& principal);
// The session's principal; an owner no transport could have made (an unknown role) is a user
// of that name, who sees only its own jobs.
model::Principal principal_of(const Session& session);

}  // namespace kforge::frontends::mcp
