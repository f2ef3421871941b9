#include "secrets.h"

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

}  // namespace

void add_secret_flags(CLI::App& cmd, SecretFlags& f, const std::string& token_help) {
  cmd.add_option("--token", f.token,
                 token_help +
                     " (visible to other local users for a moment at start-up: "
                     "prefer --token-file)")
      ->envname("KFORGE_TOKEN");
  cmd.add_option("--token-file", f.token_file,
                 "Read the API token from this file (mode 0600; surrounding whitespace is "
                 "ignored)")
      ->envname("KFORGE_TOKEN_FILE");
  cmd.add_flag("--debug-dumpable", f.debug_dumpable,
               "Leave the process dumpable (core dumps, debuggers, other processes of this "
               "user reading its /proc files); for debugging only");
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

StatusOr<std::string> read_token(const SecretFlags& f) {
  if (f.token_file.empty()) return f.token;
  if (!f.token.empty()) {
    return invalid_argument(
        "give the token once: --token-file, or --token / KFORGE_TOKEN, not both", "--token-file");
  }
  struct stat st {};
  if (::stat(f.token_file.c_str(), &st) != 0) {
    return errno_error("--token-file " + f.token_file, errno);
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    KF_LOG_WARN("token file {} is accessible to other users (mode {:04o}): chmod 600 it",
                f.token_file, st.st_mode & 07777);
  }
  std::ifstream in(f.token_file, std::ios::binary);
  if (!in) return errno_error("--token-file " + f.token_file, errno);
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  const size_t first = token.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return invalid_argument("the token file " + f.token_file + " is empty", "--token-file");
  }
  token = token.substr(first, token.find_last_not_of(" \t\r\n") - first + 1);
  if (token.find_first_of(" \t\r\n") != std::string::npos) {
    return invalid_argument("the token in " + f.token_file + " must be one word", "--token-file");
  }
  return token;
}

}  // namespace

StatusOr<std::string> protect_process_and_read_token(const SecretFlags& f) {
  KF_RETURN_IF_ERROR(make_undumpable(f));
  return read_token(f);
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
