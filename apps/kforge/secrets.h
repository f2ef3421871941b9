// Keeping the API token out of reach of other processes (docs/security.md "The token").
//
// - The token comes from --token-file FILE (preferred), --token or KFORGE_TOKEN; `serve`
//   also reads --admin-token-file and --tokens-file (frontends/http/api_tokens.h). A token
//   file that its group or other users may read or write is refused (the error names the
//   file, its mode and `chmod 600`) unless --allow-loose-token-file is given (then a warning).
// - scrub_token_from_process() overwrites the token's bytes where the kernel shows them:
//   the value of `--token X` / `--token=X` in argv (/proc/<pid>/cmdline reads that memory)
//   and of KFORGE_TOKEN in the original environment block (/proc/<pid>/environ reads that
//   memory, whatever setenv/unsetenv did later), and removes KFORGE_TOKEN from the
//   environment. Between exec and the scrub the token is visible for a moment: use
//   --token-file where that matters.
// - make_undumpable() sets PR_SET_DUMPABLE to 0: /proc/<pid>/{environ,mem,maps,...} become
//   root-owned, so no other uid (nor a process of the same uid without CAP_SYS_PTRACE) can
//   read them or attach a debugger; no core dump is written. --debug-dumpable skips it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/frontends/http/api_tokens.h"

namespace kforge::app {

struct SecretFlags {
  std::string token;                    // --token / KFORGE_TOKEN
  std::string token_file;               // --token-file / KFORGE_TOKEN_FILE
  bool allow_loose_token_file = false;  // --allow-loose-token-file: warn instead of refusing
  bool debug_dumpable = false;
  // `serve` only (add_principal_flags):
  std::string admin_token_file;  // --admin-token-file / KFORGE_ADMIN_TOKEN_FILE
  std::string tokens_file;       // --tokens-file / KFORGE_TOKENS_FILE
};

// Registers --token (described by `token_help`), --token-file, --allow-loose-token-file and
// --debug-dumpable.
void add_secret_flags(CLI::App& cmd, SecretFlags& flags, const std::string& token_help);

// Registers --admin-token-file and --tokens-file (`serve`).
void add_principal_flags(CLI::App& cmd, SecretFlags& flags);

// What `serve` and `mcp` do first: make the process non-dumpable (prctl(PR_SET_DUMPABLE, 0))
// unless flags.debug_dumpable, then return the token the flags give ("" for none).
// kInvalidArgument when both a token and a file are given, the file is empty, or its group or
// other users may read or write it (without --allow-loose-token-file); kIo when it cannot be
// read.
StatusOr<std::string> protect_process_and_read_token(const SecretFlags& flags);

// The tokens of --admin-token-file and --tokens-file, with their principals (none when
// neither is given); `token` (what protect_process_and_read_token returned) is checked
// against them (a token given twice is an error). The same file checks as the token file.
StatusOr<std::vector<frontends::http::ApiToken>> read_principal_tokens(const SecretFlags& flags,
                                                                       const std::string& token);

// See above. `argv` and `envp` are main()'s; call once, after the command line was parsed.
void scrub_token_from_process(int argc, char** argv, char** envp);

}  // namespace kforge::app
