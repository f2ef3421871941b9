// API tokens and the principals they stand for (model/principal.h; docs/security.md "The
// token" and "Who sees which jobs").
//
// `kforge serve` takes tokens from three places, all optional and combined:
//   --token-file FILE / --token / KFORGE_TOKEN   one token: the user principal "default"
//   --admin-token-file FILE                      one token: the admin principal "admin"
//   --tokens-file FILE                           one line per token: "<name> <role> <token>"
//
// The tokens file (parse_tokens_file): blank lines and lines starting with '#' are skipped;
// every other line is three fields separated by spaces or tabs: a principal name (1 to 64 of
// [A-Za-z0-9._-]), a role (`user` or `admin`) and the token (at least 16 characters, no
// white space). Several tokens may name one principal (to rotate a token: add the new one,
// then remove the old one), always with one role. A token may appear once in all sources.
//
// Example:
//   # kforge tokens (mode 0600)
//   alice  user   3f9c0e5d8a71b2c4e6f80912a3b4c5d6
//   ci     user   7a1b2c3d4e5f60718293a4b5c6d7e8f9
//   ops    admin  0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f6
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/model/principal.h"

namespace kforge::frontends::http {

struct ApiToken {
  std::string secret;  // compared in constant time; never logged or stored
  model::Principal principal;
};

// The principal names of the single-token flags.
inline constexpr std::string_view kDefaultPrincipal = "default";  // --token-file, --token
inline constexpr std::string_view kAdminPrincipal = "admin";      // --admin-token-file

// Shortest token the tokens file accepts.
inline constexpr size_t kMinTokenLength = 16;

// The tokens of a tokens file's `text`; kInvalidArgument naming `file`, the line and the
// reason (the token itself is never quoted).
StatusOr<std::vector<ApiToken>> parse_tokens_file(std::string_view text, const std::string& file);

// Checks a set of tokens gathered from every source: no token twice, and no principal with
// two roles. kInvalidArgument naming the principal (never the token).
Status check_tokens(const std::vector<ApiToken>& tokens);

}  // namespace kforge::frontends::http
