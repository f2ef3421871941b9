// Keeping the API token out of reach of other processes (docs/security.md "The token").
//
// - The token comes from --token-file FILE (preferred: the file should be mode 0600; a
//   warning says so otherwise), --token or KFORGE_TOKEN.
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

#include "kforge/common/status.h"

namespace kforge::app {

struct SecretFlags {
  std::string token;       // --token / KFORGE_TOKEN
  std::string token_file;  // --token-file / KFORGE_TOKEN_FILE
  bool debug_dumpable = false;
};

// Registers --token (described by `token_help`), --token-file and --debug-dumpable.
void add_secret_flags(CLI::App& cmd, SecretFlags& flags, const std::string& token_help);

// What `serve` and `mcp` do first: make the process non-dumpable (prctl(PR_SET_DUMPABLE, 0))
// unless flags.debug_dumpable, then return the token the flags give ("" for none).
// kInvalidArgument when both a token and a file are given, or the file is empty; kIo when it
// cannot be read. Warns (log) about a token file that other users may read.
StatusOr<std::string> protect_process_and_read_token(const SecretFlags& flags);

// See above. `argv` and `envp` are main()'s; call once, after the command line was parsed.
void scrub_token_from_process(int argc, char** argv, char** envp);

}  // namespace kforge::app
