#include "kforge/workers/worker_env.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

extern char** environ;  // NOLINT: POSIX

namespace kforge::workers {
namespace {

constexpr std::array<std::string_view, 16> kExactNames = {"PATH",
                                                          "HOME",
                                                          "USER",
                                                          "LANG",
                                                          "TZ",
                                                          "TMPDIR",
                                                          "LD_LIBRARY_PATH",
                                                          "CUDA_HOME",
                                                          "CUDA_PATH",
                                                          "CUDA_CACHE_PATH",
                                                          "CC",
                                                          "CXX",
                                                          "TORCH_CUDA_ARCH_LIST",
                                                          "MAX_JOBS",
                                                          "OMP_NUM_THREADS",
                                                          "LOGNAME"};
constexpr std::array<std::string_view, 3> kPrefixes = {"LC_", "NVIDIA_", "TRITON_"};

bool allowed(const std::string& name, const std::vector<std::string>& extra) {
  if (is_secret_env_name(name)) return false;
  if (name == "TRITON_INTERPRET") return false;  // set per device by the worker
  if (std::find(extra.begin(), extra.end(), name) != extra.end()) return true;
  for (auto n : kExactNames) {
    if (name == n) return true;
  }
  for (auto p : kPrefixes) {
    if (name.starts_with(p)) return true;
  }
  return false;
}

}  // namespace

bool is_secret_env_name(const std::string& name) {
  std::string upper = name;
  for (char& c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper.starts_with("KFORGE_")) return true;
  for (std::string_view bad : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "_KEY",
                               "APIKEY", "AWS_", "GOOGLE_APPLICATION"}) {
    if (upper.find(bad) != std::string::npos) return true;
  }
  return false;
}

std::map<std::string, std::string> base_worker_env(const std::vector<std::string>& extra_names) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string name(entry.substr(0, eq));
    if (allowed(name, extra_names)) env[name] = std::string(entry.substr(eq + 1));
  }
  if (!env.contains("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  return env;
}

}  // namespace kforge::workers
