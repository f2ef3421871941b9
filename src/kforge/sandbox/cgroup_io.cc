#include "kforge/sandbox/cgroup_io.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#include "kforge/common/errno_message.h"

namespace kforge::sandbox {

namespace fs = std::filesystem;

Status cgroup_write(const fs::path& file, std::string_view text) {
  std::ofstream out(file);
  if (!out) return errno_error("open " + file.string(), errno);
  out << text;
  out.flush();
  if (!out) return errno_error("write " + file.string(), errno);
  return Status::ok();
}

std::string cgroup_read(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t cgroup_read_int(const fs::path& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word == "max") return 0;
  try {
    return std::stoll(word);
  } catch (...) {
    return 0;
  }
}

int64_t cgroup_read_keyed(const fs::path& file, std::string_view key) {
  std::ifstream in(file);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

std::vector<pid_t> cgroup_members(const fs::path& dir) {
  std::vector<pid_t> pids;
  std::ifstream in(dir / "cgroup.procs");
  pid_t pid = 0;
  while (in >> pid) {
    pids.push_back(pid);
  }
  return pids;
}

std::string own_cgroup_path(std::string_view controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    auto first = line.find(':');
    auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (controller.empty()) {
      if (controllers.empty()) return path;
      continue;
    }
    std::stringstream ss(controllers);
    std::string c;
    while (std::getline(ss, c, ',')) {
      if (c == controller) return path;
    }
  }
  return "/";
}

void kill_cgroup_members(const fs::path& dir) {
  if (fs::exists(dir / "cgroup.kill") && cgroup_write(dir / "cgroup.kill", "1").is_ok()) return;
  for (pid_t pid : cgroup_members(dir))
    ::kill(pid, SIGKILL);
}

bool wait_cgroup_empty(const fs::path& dir, std::chrono::steady_clock::time_point deadline) {
  while (!cgroup_members(dir).empty()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

bool remove_cgroup_once(const fs::path& dir) {
  return ::rmdir(dir.c_str()) == 0 || errno == ENOENT;
}

}  // namespace kforge::sandbox
