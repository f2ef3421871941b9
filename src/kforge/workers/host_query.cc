#include "kforge/workers/host_query.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <sstream>

#include "kforge/common/json.h"
#include "kforge/worker_protocol/process.h"
#include "kforge/worker_protocol/unique_fd.h"

namespace kforge::workers {
namespace {

namespace fs = std::filesystem;
using worker_protocol::UniqueFd;

// What the interpreter prints: one JSON object.
constexpr const char* kLayoutScript = R"(
import json, site, sys, sysconfig
paths = sysconfig.get_paths()
dirs = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib", "include",
                               "platinclude", "scripts")]
dirs.append(sysconfig.get_config_var("LIBDIR"))
dirs += site.getsitepackages()
if site.ENABLE_USER_SITE:
    dirs.append(site.getusersitepackages())
print(json.dumps({"executable": sys.executable, "prefix": sys.prefix,
                  "base_prefix": sys.base_prefix, "dirs": [d for d in dirs if d],
                  "sys_path": sys.path}))
)";

// Runs `argv` with `env`; its standard output (at most 1 MiB), or an error after `timeout`.
StatusOr<std::string> capture_stdout(const std::vector<std::string>& argv,
                                     const std::map<std::string, std::string>& env,
                                     std::chrono::milliseconds timeout) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return errno_error("pipe", errno);
  UniqueFd read_end(ends[0]), write_end(ends[1]);
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull.valid()) return errno_error("open /dev/null", errno);
  worker_protocol::LaunchOptions launch;
  launch.argv = argv;
  launch.env = env;
  launch.fds = {{0, devnull.get()}, {1, write_end.get()}, {2, devnull.get()}};
  KF_ASSIGN_OR_RETURN(worker_protocol::Process process, worker_protocol::launch_process(launch));
  write_end.reset();
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{read_end.get(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      return unavailable(argv[0] + " did not answer within " + std::to_string(timeout.count()) +
                         " ms");
    }
    char buf[8192];
    const ssize_t n = ::read(read_end.get(), buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1U << 20)) return unavailable(argv[0] + " printed more than 1 MiB");
  }
  auto status = process.wait_for(std::chrono::milliseconds(2000));
  if (!status || status->exit_code != 0) {
    return unavailable(argv[0] + " " + (status ? status->describe() : "did not exit"));
  }
  return out;
}

std::vector<std::string> strings_of(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || !j[key].is_array()) return out;
  for (const auto& v : j[key]) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

bool has_library(const fs::path& dir, const std::vector<std::string>& prefixes) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const auto& p : prefixes) {
      if (name.starts_with(p)) return true;
    }
  }
  return false;
}

void add_once(std::vector<std::string>& out, const std::string& dir) {
  if (std::find(out.begin(), out.end(), dir) == out.end()) out.push_back(dir);
}

}  // namespace

StatusOr<PythonLayout> python_layout(const std::string& python,
                                     const std::map<std::string, std::string>& env,
                                     std::chrono::milliseconds timeout) {
  auto printed = capture_stdout({python, "-c", kLayoutScript}, env, timeout);
  if (!printed.is_ok()) {
    return unavailable("cannot ask the workers' Python (" + python +
                       ") where its files are: " + printed.status().message());
  }
  Json j = Json::parse(*printed, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("executable") || !j["executable"].is_string()) {
    return unavailable("the workers' Python (" + python +
                       ") gave no layout: " + printed->substr(0, 200));
  }
  PythonLayout layout;
  layout.executable = j["executable"].get<std::string>();
  layout.prefix = j.value("prefix", "");
  layout.is_venv = layout.prefix != j.value("base_prefix", layout.prefix);
  layout.directories = strings_of(j, "dirs");
  for (const auto& p : strings_of(j, "sys_path")) {
    if (!p.empty() && p.front() == '/') layout.sys_path.push_back(p);
  }
  return layout;
}

std::vector<std::string> loader_directories(const std::vector<std::string>& prefixes,
                                            const std::string& library_path) {
  std::vector<std::string> out;
  std::stringstream dirs(library_path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && dir.front() == '/' && has_library(dir, prefixes)) add_once(out, dir);
  }
  for (const char* ldconfig : {"/sbin/ldconfig", "/usr/sbin/ldconfig"}) {
    if (::access(ldconfig, X_OK) != 0) continue;
    auto listing = capture_stdout({ldconfig, "-p"}, {{"PATH", "/usr/sbin:/usr/bin:/sbin:/bin"}},
                                  std::chrono::milliseconds(5000));
    if (!listing.is_ok()) break;
    // "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"
    std::stringstream lines(*listing);
    for (std::string line; std::getline(lines, line);) {
      const size_t arrow = line.find(" => ");
      if (arrow == std::string::npos) continue;
      std::string name = line.substr(0, line.find(' ', line.find_first_not_of(" \t")));
      name.erase(0, name.find_first_not_of(" \t"));
      const bool wanted = std::any_of(prefixes.begin(), prefixes.end(),
                                      [&](const std::string& p) { return name.starts_with(p); });
      if (wanted) add_once(out, fs::path(line.substr(arrow + 4)).parent_path().string());
    }
    break;
  }
  return out;
}

}  // namespace kforge::workers
