#include "kforge/frontends/mcp/session_principal.h"

#include <gtest/gtest.h>

namespace kforge::frontends::mcp {
namespace {

TEST(SessionPrincipalTest, APrincipalComesBackFromItsSessionsOwner) {
  for (const model::Principal& p :
       {model::Principal{}, model::Principal{"alice", model::Role::kUser},
        model::Principal{"root", model::Role::kAdmin}, model::Principal{"", model::Role::kUser}}) {
    Session session("id", "peer", owner_of(p));
    EXPECT_EQ(principal_of(session), p) << p.name;
  }
  EXPECT_EQ(owner_of(model::Principal{}), SessionOwner{});  // anonymous: the default owner
  EXPECT_EQ(owner_of({"alice", model::Role::kAdmin}), (SessionOwner{"alice", "admin"}));
}

TEST(SessionPrincipalTest, AnOwnerNoTransportMadeSeesOnlyItsOwnJobs) {
  Session session("id", "peer", SessionOwner{"mallory", "root"});
  const model::Principal p = principal_of(session);
  EXPECT_EQ(p.role, model::Role::kUser);
  EXPECT_TRUE(p.may_access("mallory"));
  EXPECT_FALSE(p.may_access("alice"));
}

}  // namespace
}  // namespace kforge::frontends::mcp
