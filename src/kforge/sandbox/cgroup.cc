#include "kforge/sandbox/cgroup.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#include "kforge/common/errno_message.h"
#include "kforge/common/files.h"
#include "kforge/common/log.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

namespace kforge::sandbox {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

Status write_text(const fs::path& file, std::string_view text) {
  std::ofstream out(file);
  if (!out) return errno_error("open " + file.string(), errno);
  out << text;
  out.flush();
  if (!out) return errno_error("write " + file.string(), errno);
  return Status::ok();
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t read_int(const fs::path& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word == "max") return 0;
  try {
    return std::stoll(word);
  } catch (...) {
    return 0;
  }
}

// "key value" lines (memory.events, pids.events, memory.oom_control).
int64_t read_keyed(const fs::path& file, std::string_view key) {
  std::ifstream in(file);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// The server's own cgroup path in hierarchy `controller` ("" = the v2/unified hierarchy).
std::string own_cgroup(std::string_view controller) {
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

std::vector<pid_t> pids_in(const fs::path& procs) {
  std::vector<pid_t> pids;
  std::ifstream in(procs);
  pid_t pid = 0;
  while (in >> pid) {
    pids.push_back(pid);
  }
  return pids;
}

// Removes a cgroup directory, retrying briefly while the kernel finishes tearing down its
// last processes (rmdir is EBUSY until then).
void remove_cgroup_dir(const fs::path& dir) {
  for (int i = 0; i < 50; ++i) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  KF_LOG_WARN("cgroup {} could not be removed: {}", dir.string(), errno_message(errno));
}

bool wait_empty(const fs::path& procs, Clock::time_point deadline) {
  while (!pids_in(procs).empty()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// cgroup v2: <tree>/<job>.
class V2Job final : public JobCgroup {
 public:
  V2Job(fs::path dir, std::string name) : dir_(std::move(dir)), name_(std::move(name)) {}
  ~V2Job() override {
    kill_all(std::chrono::milliseconds(2000));
    remove_cgroup_dir(dir_);
  }
  Status attach(pid_t pid) override {
    return write_text(dir_ / "cgroup.procs", std::to_string(pid));
  }
  bool kill_all(std::chrono::milliseconds wait) override {
    auto deadline = Clock::now() + wait;
    if (!write_text(dir_ / "cgroup.kill", "1").is_ok()) {
      // Kernels before 5.14: signal every member until none is left.
      for (pid_t pid : pids_in(dir_ / "cgroup.procs"))
        ::kill(pid, SIGKILL);
    }
    return wait_empty(dir_ / "cgroup.procs", deadline);
  }
  void signal_all(int sig) override {
    for (pid_t pid : pids_in(dir_ / "cgroup.procs"))
      ::kill(pid, sig);
  }
  JobCgroupStats stats() const override {
    JobCgroupStats s;
    s.memory_peak_bytes = read_int(dir_ / "memory.peak");
    s.memory_current_bytes = read_int(dir_ / "memory.current");
    s.oom_kills = read_keyed(dir_ / "memory.events", "oom_kill");
    s.pids_max_hits = read_keyed(dir_ / "pids.events", "max");
    s.pids_current = read_int(dir_ / "pids.current");
    return s;
  }
  std::string name() const override { return name_; }

 private:
  fs::path dir_;
  std::string name_;
};

class V2Tree final : public CgroupTree {
 public:
  explicit V2Tree(fs::path base) : base_(std::move(base)) {}
  ~V2Tree() override { remove_cgroup_dir(base_); }

  StatusOr<std::unique_ptr<JobCgroup>> create_job(const std::string& name,
                                                  const CgroupLimits& limits) override {
    fs::path dir = base_ / name;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return errno_error("mkdir " + dir.string(), errno);
    }
    auto job = std::make_unique<V2Job>(dir, name);
    if (limits.memory_bytes > 0) {
      KF_RETURN_IF_ERROR(write_text(dir / "memory.max", std::to_string(limits.memory_bytes)));
      (void)write_text(dir / "memory.swap.max", "0");
      (void)write_text(dir / "memory.oom.group", "1");
    }
    if (limits.pids_max > 0) {
      KF_RETURN_IF_ERROR(write_text(dir / "pids.max", std::to_string(limits.pids_max)));
    }
    return std::unique_ptr<JobCgroup>(std::move(job));
  }
  Json describe() const override {
    return {{"version", "v2"}, {"path", base_.string()}, {"controllers", {"memory", "pids"}}};
  }

 private:
  fs::path base_;
};

// Hybrid: memory and pids in v1 hierarchies, kill and events in the unified tree.
class HybridJob final : public JobCgroup {
 public:
  HybridJob(fs::path memory, fs::path pids, fs::path unified, std::string name)
      : memory_(std::move(memory)),
        pids_(std::move(pids)),
        unified_(std::move(unified)),
        name_(std::move(name)) {}
  ~HybridJob() override {
    kill_all(std::chrono::milliseconds(2000));
    for (const auto& d : {unified_, pids_, memory_})
      if (!d.empty()) remove_cgroup_dir(d);
  }
  Status attach(pid_t pid) override {
    for (const auto& d : {memory_, pids_, unified_}) {
      if (d.empty()) continue;
      KF_RETURN_IF_ERROR(write_text(d / "cgroup.procs", std::to_string(pid)));
    }
    return Status::ok();
  }
  bool kill_all(std::chrono::milliseconds wait) override {
    auto deadline = Clock::now() + wait;
    const fs::path procs = (unified_.empty() ? memory_ : unified_) / "cgroup.procs";
    if (unified_.empty() || !write_text(unified_ / "cgroup.kill", "1").is_ok()) {
      // No cgroup.kill: kill every member until none is left (forks racing the kill are
      // caught by the next pass).
      while (Clock::now() < deadline) {
        auto pids = pids_in(procs);
        if (pids.empty()) break;
        for (pid_t pid : pids)
          ::kill(pid, SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return wait_empty(procs, deadline);
  }
  void signal_all(int sig) override {
    for (pid_t pid : pids_in((unified_.empty() ? memory_ : unified_) / "cgroup.procs"))
      ::kill(pid, sig);
  }
  JobCgroupStats stats() const override {
    JobCgroupStats s;
    s.memory_peak_bytes = read_int(memory_ / "memory.max_usage_in_bytes");
    s.memory_current_bytes = read_int(memory_ / "memory.usage_in_bytes");
    s.oom_kills = read_keyed(memory_ / "memory.oom_control", "oom_kill");
    s.pids_max_hits = read_keyed(pids_ / "pids.events", "max");
    s.pids_current = read_int(pids_ / "pids.current");
    return s;
  }
  std::string name() const override { return name_; }

 private:
  fs::path memory_, pids_, unified_;
  std::string name_;
};

class HybridTree final : public CgroupTree {
 public:
  HybridTree(fs::path memory, fs::path pids, fs::path unified)
      : memory_(std::move(memory)), pids_(std::move(pids)), unified_(std::move(unified)) {}
  ~HybridTree() override {
    for (const auto& d : {unified_, pids_, memory_})
      if (!d.empty()) remove_cgroup_dir(d);
  }
  StatusOr<std::unique_ptr<JobCgroup>> create_job(const std::string& name,
                                                  const CgroupLimits& limits) override {
    fs::path mem = memory_ / name;
    fs::path pid = pids_ / name;
    fs::path uni = unified_.empty() ? fs::path() : unified_ / name;
    for (const auto& d : {mem, pid, uni}) {
      if (d.empty()) continue;
      if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
        return errno_error("mkdir " + d.string(), errno);
      }
    }
    auto job = std::make_unique<HybridJob>(mem, pid, uni, name);
    if (limits.memory_bytes > 0) {
      KF_RETURN_IF_ERROR(
          write_text(mem / "memory.limit_in_bytes", std::to_string(limits.memory_bytes)));
      (void)write_text(mem / "memory.oom_control", "0");  // the OOM killer acts in the group
    }
    if (limits.pids_max > 0) {
      KF_RETURN_IF_ERROR(write_text(pid / "pids.max", std::to_string(limits.pids_max)));
    }
    return std::unique_ptr<JobCgroup>(std::move(job));
  }
  Json describe() const override {
    return {{"version", "hybrid"},
            {"path", memory_.string()},
            {"pids_path", pids_.string()},
            {"unified_path", unified_.string()},
            {"controllers", {"memory", "pids"}}};
  }

 private:
  fs::path memory_, pids_, unified_;
};

Status make_dir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return errno_error("mkdir " + dir.string(), errno);
  }
  return Status::ok();
}

// Removes leftovers of earlier servers (kforge-<pid> whose pid is gone) under `parent`.
void remove_stale(const fs::path& parent) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with("kforge-") || !entry.is_directory()) continue;
    pid_t pid = 0;
    try {
      pid = static_cast<pid_t>(std::stol(name.substr(7)));
    } catch (...) {
      continue;
    }
    if (pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM)) continue;
    for (const auto& job : fs::directory_iterator(entry.path(), ec)) {
      if (!job.is_directory()) continue;
      if (fs::exists(job.path() / "cgroup.kill")) (void)write_text(job.path() / "cgroup.kill", "1");
      for (pid_t p : pids_in(job.path() / "cgroup.procs"))
        ::kill(p, SIGKILL);
      remove_cgroup_dir(job.path());
    }
    remove_cgroup_dir(entry.path());
  }
}

StatusOr<std::unique_ptr<CgroupTree>> make_v2(const CgroupOptions& o) {
  fs::path top = o.mount / "kforge";
  KF_RETURN_IF_ERROR(make_dir(top));
  std::string controllers = read_text(o.mount / "cgroup.subtree_control");
  if (controllers.find("memory") == std::string::npos ||
      controllers.find("pids") == std::string::npos) {
    return unavailable("the root cgroup does not delegate the memory and pids controllers");
  }
  KF_RETURN_IF_ERROR(write_text(top / "cgroup.subtree_control", "+memory +pids"));
  remove_stale(top);
  fs::path base = top / o.instance;
  KF_RETURN_IF_ERROR(make_dir(base));
  KF_RETURN_IF_ERROR(write_text(base / "cgroup.subtree_control", "+memory +pids"));
  return std::unique_ptr<CgroupTree>(std::make_unique<V2Tree>(base));
}

StatusOr<std::unique_ptr<CgroupTree>> make_hybrid(const CgroupOptions& o) {
  fs::path mem_parent = o.mount / "memory" / own_cgroup("memory").substr(1);
  fs::path pids_parent = o.mount / "pids" / own_cgroup("pids").substr(1);
  if (!fs::exists(mem_parent / "memory.limit_in_bytes")) {
    return unavailable("no cgroup v1 memory controller at " + mem_parent.string());
  }
  if (!fs::exists(pids_parent / "pids.max") && !fs::exists(o.mount / "pids" / "cgroup.procs")) {
    return unavailable("no cgroup v1 pids controller under " + (o.mount / "pids").string());
  }
  fs::path uni_parent;
  if (fs::exists(o.mount / "unified" / "cgroup.procs")) {
    uni_parent = o.mount / "unified" / own_cgroup("").substr(1);
  }
  for (const auto& p : {mem_parent, pids_parent, uni_parent}) {
    if (!p.empty()) remove_stale(p);
  }
  fs::path mem = mem_parent / o.instance;
  fs::path pids = pids_parent / o.instance;
  fs::path uni = uni_parent.empty() ? fs::path() : uni_parent / o.instance;
  KF_RETURN_IF_ERROR(make_dir(mem));
  KF_RETURN_IF_ERROR(make_dir(pids));
  if (!uni.empty() && !make_dir(uni).is_ok()) uni.clear();
  return std::unique_ptr<CgroupTree>(std::make_unique<HybridTree>(mem, pids, uni));
}

}  // namespace

StatusOr<std::unique_ptr<CgroupTree>> make_cgroup_tree(const CgroupOptions& options) {
  if (options.instance.empty()) return invalid_argument("cgroup instance name is empty");
  struct statfs st {};
  if (::statfs(options.mount.c_str(), &st) != 0) {
    return unavailable("no cgroup file system at " + options.mount.string());
  }
  if (::access(options.mount.c_str(), W_OK) != 0 &&
      ::access((options.mount / "memory").c_str(), W_OK) != 0) {
    return unavailable("cgroups at " + options.mount.string() + " are not writable by kforge");
  }
  if (static_cast<uint64_t>(st.f_type) == CGROUP2_SUPER_MAGIC) return make_v2(options);
  return make_hybrid(options);
}

int64_t default_job_memory_bytes(const fs::path& mount) {
  int64_t machine = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
  int64_t limit = machine;
  struct statfs st {};
  if (::statfs(mount.c_str(), &st) == 0 &&
      static_cast<uint64_t>(st.f_type) == CGROUP2_SUPER_MAGIC) {
    int64_t own = read_int(mount / own_cgroup("").substr(1) / "memory.max");
    if (own > 0) limit = std::min(limit, own);
  } else {
    int64_t own =
        read_int(mount / "memory" / own_cgroup("memory").substr(1) / "memory.limit_in_bytes");
    if (own > 0 && own < (int64_t{1} << 60)) limit = std::min(limit, own);
  }
  return limit / 4 * 3;
}

}  // namespace kforge::sandbox
