#include "kforge/frontends/http/api_tokens.h"

#include <gtest/gtest.h>

namespace kforge::frontends::http {
namespace {

TEST(ApiTokensTest, ParsesNamesRolesAndTokensSkippingCommentsAndBlankLines) {
  auto tokens = parse_tokens_file(
      "# kforge tokens\n"
      "\n"
      "alice  user   3f9c0e5d8a71b2c4e6f80912a3b4c5d6\r\n"
      "\tops\tadmin\t0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f6  \n"
      "alice user 7a1b2c3d4e5f60718293a4b5c6d7e8f9",
      "tokens.txt");
  ASSERT_TRUE(tokens.is_ok()) << tokens.status().to_string();
  ASSERT_EQ(tokens->size(), 3u);
  EXPECT_EQ((*tokens)[0].secret, "3f9c0e5d8a71b2c4e6f80912a3b4c5d6");
  EXPECT_EQ((*tokens)[0].principal, (model::Principal{"alice", model::Role::kUser}));
  EXPECT_EQ((*tokens)[1].principal, (model::Principal{"ops", model::Role::kAdmin}));
  EXPECT_EQ((*tokens)[2].principal.name, "alice");  // a second token of one principal
  EXPECT_TRUE(check_tokens(*tokens).is_ok());
}

TEST(ApiTokensTest, RefusesBadLinesNamingTheLineButNeverTheToken) {
  const std::pair<const char*, const char*> cases[] = {
      {"alice user", "expected '<name> <role> <token>'"},
      {"alice user 3f9c0e5d8a71b2c4e6f80912a3b4c5d6 extra", "got 4 field(s)"},
      {"al/ice user 3f9c0e5d8a71b2c4e6f80912a3b4c5d6", "must be 1 to 64 of"},
      {"alice root 3f9c0e5d8a71b2c4e6f80912a3b4c5d6", "the role must be 'user' or 'admin'"},
      {"alice anonymous 3f9c0e5d8a71b2c4e6f80912a3b4c5d6", "the role must be 'user' or 'admin'"},
      {"alice user short-secret", "shorter than 16 characters"},
      {"# only a comment\n", "holds no token"},
  };
  for (const auto& [text, why] : cases) {
    auto tokens = parse_tokens_file(std::string("# header\n") + text, "t.txt");
    ASSERT_FALSE(tokens.is_ok()) << text;
    EXPECT_EQ(tokens.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(tokens.status().field_path(), "--tokens-file");
    EXPECT_NE(tokens.status().message().find(why), std::string::npos)
        << tokens.status().to_string();
    EXPECT_EQ(tokens.status().message().find("short-secret"), std::string::npos);
    EXPECT_EQ(tokens.status().message().find("3f9c0e5d"), std::string::npos);
  }
  EXPECT_NE(parse_tokens_file("\nalice user", "t.txt").status().message().find("t.txt line 2"),
            std::string::npos);
}

TEST(ApiTokensTest, ATokenTwiceOrAPrincipalWithTwoRolesIsRefused) {
  std::vector<ApiToken> twice = {{"same-secret-0123456789", {"alice", model::Role::kUser}},
                                 {"same-secret-0123456789", {"bob", model::Role::kUser}}};
  Status s = check_tokens(twice);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("given twice"), std::string::npos);
  EXPECT_EQ(s.message().find("same-secret"), std::string::npos);
  std::vector<ApiToken> roles = {{"secret-one-0123456789", {"alice", model::Role::kUser}},
                                 {"secret-two-0123456789", {"alice", model::Role::kAdmin}}};
  EXPECT_NE(check_tokens(roles).message().find("both roles"), std::string::npos);
}

TEST(PrincipalTest, RolesDecideWhatIsVisible) {
  const model::Principal anonymous;
  const model::Principal alice{"alice", model::Role::kUser};
  const model::Principal ops{"ops", model::Role::kAdmin};
  EXPECT_TRUE(anonymous.may_access("alice"));
  EXPECT_TRUE(anonymous.may_access(""));
  EXPECT_FALSE(anonymous.sees_job_ids());
  EXPECT_TRUE(anonymous.may_administer());
  EXPECT_TRUE(alice.may_access("alice"));
  EXPECT_FALSE(alice.may_access("bob"));
  EXPECT_FALSE(alice.may_access(""));  // jobs of a server without tokens, or older ones
  EXPECT_FALSE(alice.sees_job_ids());
  EXPECT_FALSE(alice.may_administer());
  EXPECT_TRUE(ops.may_access("alice"));
  EXPECT_TRUE(ops.sees_job_ids());
  EXPECT_TRUE(ops.may_administer());
  EXPECT_TRUE(model::is_principal_name("ci-runner_2.x"));
  EXPECT_FALSE(model::is_principal_name(""));
  EXPECT_FALSE(model::is_principal_name("(unauthenticated)"));
  EXPECT_FALSE(model::is_principal_name(std::string(65, 'a')));
  EXPECT_EQ(model::role_from("admin"), model::Role::kAdmin);
  EXPECT_EQ(model::role_from("root"), std::nullopt);
}

}  // namespace
}  // namespace kforge::frontends::http
