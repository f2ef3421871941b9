#include "secrets.h"

#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#include "kforge/common/log.h"

namespace kforge::app {
namespace {

constexpr std::string_view kTokenFlag = "--token";
constexpr std::string_view kTokenVariable = "KFORGE_TOKEN=";

void overwrite(char* text) {
  std::memset(text, '*', std::strlen(text));
}

// The one token of a single-token file's `text`: surrounding white space ignored.
StatusOr<std::string> one_token(std::string text, const std::string& file,
                                const std::string& flag) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return invalid_argument("the token file " + file + " is empty", flag);
  }
  text = text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
  if (text.find_first_of(" \t\r\n") != std::string::npos) {
    return invalid_argument("the token in " + file + " must be one word", flag);
  }
  return text;
}

}  // namespace

void add_secret_flags(CLI::App& cmd, SecretFlags& f, const std::string& token_help) {
  cmd.add_option("--token", f.token,
                 token_help +
                     " (visible to other local users for a moment at start-up: "
                     "prefer --token-file)")
      ->envname("KFORGE_TOKEN");
  cmd.add_option("--token-file", f.token_file,
                 "Read the API token from this file (mode 0600: a file its group or other "
                 "users may read or write is refused; surrounding whitespace is ignored)")
      ->envname("KFORGE_TOKEN_FILE");
  cmd.add_flag("--allow-loose-token-file", f.allow_loose_token_file,
               "Accept token files that their group or other users may read or write (a "
               "warning instead of an error); never on a shared host");
  cmd.add_flag("--debug-dumpable", f.debug_dumpable,
               "Leave the process dumpable (core dumps, debuggers, other processes of this "
               "user reading its /proc files); for debugging only");
}

void add_principal_flags(CLI::App& cmd, SecretFlags& f) {
  cmd.add_option("--admin-token-file", f.admin_token_file,
                 "Read an admin token from this file (mode 0600): its holder, the principal "
                 "'admin', sees every job and may POST /admin/cleanup-jobs")
      ->envname("KFORGE_ADMIN_TOKEN_FILE");
  cmd.add_option("--tokens-file", f.tokens_file,
                 "Read API tokens from this file (mode 0600), one per line: '<name> <role> "
                 "<token>' with role user or admin; each client sees only the jobs of its "
                 "name (docs/security.md)")
      ->envname("KFORGE_TOKENS_FILE");
}

namespace {

Status make_undumpable(const SecretFlags& f) {
  if (f.debug_dumpable) {
    KF_LOG_WARN(
        "--debug-dumpable: this process's memory and /proc files stay readable by "
        "processes of its user");
    return Status::ok();
  }
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    return errno_error("prctl(PR_SET_DUMPABLE)", errno);
  return Status::ok();
}

// The contents of the secret file `path` given by `flag`. Refused when its group or other users
// may read or write it (a warning with --allow-loose-token-file): they could use the token.
StatusOr<std::string> read_secret_file(const std::string& path, const std::string& flag,
                                       bool allow_loose) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno_error(flag + " " + path, errno);
  if (!S_ISREG(st.st_mode)) {
    return invalid_argument("the token file " + path + " is not a regular file", flag);
  }
  const unsigned mode = st.st_mode & 07777;
  if ((st.st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)) != 0) {
    const std::string why = fmt::format(
        "the token file {} may be read or written by its group or other users (mode {:04o}): "
        "run 'chmod 600 {}'",
        path, mode, path);
    if (!allow_loose) {
      return invalid_argument(why + " (or pass --allow-loose-token-file to accept it)", flag);
    }
    KF_LOG_WARN("{}; accepted because of --allow-loose-token-file", why);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return errno_error(flag + " " + path, errno);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

StatusOr<std::string> read_token(const SecretFlags& f) {
  if (f.token_file.empty()) return f.token;
  if (!f.token.empty()) {
    return invalid_argument(
        "give the token once: --token-file, or --token / KFORGE_TOKEN, not both", "--token-file");
  }
  KF_ASSIGN_OR_RETURN(std::string token,
                      read_secret_file(f.token_file, "--token-file", f.allow_loose_token_file));
  return one_token(token, f.token_file, "--token-file");
}

}  // namespace

StatusOr<std::string> protect_process_and_read_token(const SecretFlags& f) {
  KF_RETURN_IF_ERROR(make_undumpable(f));
  return read_token(f);
}

StatusOr<std::vector<frontends::http::ApiToken>> read_principal_tokens(const SecretFlags& f,
                                                                       const std::string& token) {
  using frontends::http::ApiToken;
  std::vector<ApiToken> tokens;
  if (!f.admin_token_file.empty()) {
    KF_ASSIGN_OR_RETURN(std::string text, read_secret_file(f.admin_token_file, "--admin-token-file",
                                                           f.allow_loose_token_file));
    KF_ASSIGN_OR_RETURN(std::string admin,
                        one_token(std::move(text), f.admin_token_file, "--admin-token-file"));
    tokens.push_back(
        {std::move(admin), {std::string(frontends::http::kAdminPrincipal), model::Role::kAdmin}});
  }
  if (!f.tokens_file.empty()) {
    KF_ASSIGN_OR_RETURN(std::string text,
                        read_secret_file(f.tokens_file, "--tokens-file", f.allow_loose_token_file));
    KF_ASSIGN_OR_RETURN(auto listed, frontends::http::parse_tokens_file(text, f.tokens_file));
    for (ApiToken& t : listed)
      tokens.push_back(std::move(t));
  }
  std::vector<ApiToken> all = tokens;
  if (!token.empty()) {
    all.push_back({token, {std::string(frontends::http::kDefaultPrincipal), model::Role::kUser}});
  }
  KF_RETURN_IF_ERROR(frontends::http::check_tokens(all));
  return tokens;
}

void scrub_token_from_process(int argc, char** argv, char** envp) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg(argv[i]);
    if (arg == kTokenFlag && i + 1 < argc) {
      overwrite(argv[++i]);
    } else if (arg.size() > kTokenFlag.size() && arg.substr(0, kTokenFlag.size()) == kTokenFlag &&
               arg[kTokenFlag.size()] == '=') {
      overwrite(argv[i] + kTokenFlag.size() + 1);
    }
  }
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, kTokenVariable.data(), kTokenVariable.size()) == 0) {
      overwrite(*e + kTokenVariable.size());
    }
  }
  ::unsetenv("KFORGE_TOKEN");  // NOLINT(concurrency-mt-unsafe): before any thread starts
}

}  // namespace kforge::app
