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
#include "kforge/sandbox/cgroup_io.h"
#include "kforge/sandbox/cgroup_reaper.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

namespace kforge::sandbox {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// cgroup v2: <tree>/<job>.
class V2Job final : public JobCgroup {
 public:
  V2Job(fs::path dir, std::string name, std::shared_ptr<CgroupReaper> reaper)
      : dir_(std::move(dir)), name_(std::move(name)), reaper_(std::move(reaper)) {}
  // Kills what is left; the directory goes now, or once the kernel has reaped it all.
  ~V2Job() override { reaper_->remove({dir_}); }
  Status attach(pid_t pid) override {
    return cgroup_write(dir_ / "cgroup.procs", std::to_string(pid));
  }
  bool kill_all(std::chrono::milliseconds wait) override {
    const auto deadline = Clock::now() + wait;
    kill_cgroup_members(dir_);  // before 5.14 (no cgroup.kill): every member listed now
    return wait_cgroup_empty(dir_, deadline);
  }
  void signal_all(int sig) override {
    for (pid_t pid : cgroup_members(dir_))
      ::kill(pid, sig);
  }
  JobCgroupStats stats() const override {
    JobCgroupStats s;
    s.memory_peak_bytes = cgroup_read_int(dir_ / "memory.peak");
    s.memory_current_bytes = cgroup_read_int(dir_ / "memory.current");
    s.oom_kills = cgroup_read_keyed(dir_ / "memory.events", "oom_kill");
    s.pids_max_hits = cgroup_read_keyed(dir_ / "pids.events", "max");
    s.pids_current = cgroup_read_int(dir_ / "pids.current");
    return s;
  }
  std::vector<pid_t> members() const override { return cgroup_members(dir_); }
  std::string name() const override { return name_; }

 private:
  fs::path dir_;
  std::string name_;
  std::shared_ptr<CgroupReaper> reaper_;
};

// A job's directory under `parent`. A directory of that name left by a server that had this
// pid before is emptied and removed first (the job must start in an empty cgroup).
Status make_job_dir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) return Status::ok();
  if (errno != EEXIST) return errno_error("mkdir " + dir.string(), errno);
  kill_cgroup_members(dir);
  wait_cgroup_empty(dir, Clock::now() + std::chrono::seconds(2));
  if (!remove_cgroup_once(dir) || ::mkdir(dir.c_str(), 0755) != 0) {
    return errno_error("mkdir " + dir.string() + " (a stale cgroup of that name stays)", errno);
  }
  return Status::ok();
}

class V2Tree final : public CgroupTree {
 public:
  V2Tree(fs::path base, std::shared_ptr<CgroupReaper> reaper)
      : base_(std::move(base)), lock_(base_), reaper_(std::move(reaper)) {}
  ~V2Tree() override {
    reaper_->remove({base_});  // after every job's (jobs go before the tree)
    reaper_->drain(CgroupReaper::kFinalWait);
  }

  StatusOr<std::unique_ptr<JobCgroup>> create_job(const std::string& name,
                                                  const CgroupLimits& limits) override {
    fs::path dir = base_ / name;
    KF_RETURN_IF_ERROR(make_job_dir(dir));
    auto job = std::make_unique<V2Job>(dir, name, reaper_);
    if (limits.memory_bytes > 0) {
      KF_RETURN_IF_ERROR(cgroup_write(dir / "memory.max", std::to_string(limits.memory_bytes)));
      (void)cgroup_write(dir / "memory.swap.max", "0");
      (void)cgroup_write(dir / "memory.oom.group", "1");
    }
    if (limits.pids_max > 0) {
      KF_RETURN_IF_ERROR(cgroup_write(dir / "pids.max", std::to_string(limits.pids_max)));
    }
    return std::unique_ptr<JobCgroup>(std::move(job));
  }
  Json describe() const override {
    return {{"version", "v2"},
            {"path", base_.string()},
            {"controllers", {"memory", "pids"}},
            {"removal", reaper_->status()}};
  }

 private:
  fs::path base_;
  InstanceLock lock_;                     // held while this server lives
  std::shared_ptr<CgroupReaper> reaper_;  // destroyed (drained) before the lock goes
};

// Hybrid: memory and pids in v1 hierarchies, kill and events in the unified tree.
class HybridJob final : public JobCgroup {
 public:
  HybridJob(fs::path memory, fs::path pids, fs::path unified, std::string name,
            std::shared_ptr<CgroupReaper> reaper)
      : memory_(std::move(memory)),
        pids_(std::move(pids)),
        unified_(std::move(unified)),
        name_(std::move(name)),
        reaper_(std::move(reaper)) {}
  // Kills what is left; the directories go now, or once the kernel has reaped it all.
  ~HybridJob() override {
    std::vector<fs::path> dirs;
    for (const auto& d : {unified_, pids_, memory_})
      if (!d.empty()) dirs.push_back(d);
    reaper_->remove(dirs);
  }
  Status attach(pid_t pid) override {
    for (const auto& d : {memory_, pids_, unified_}) {
      if (d.empty()) continue;
      KF_RETURN_IF_ERROR(cgroup_write(d / "cgroup.procs", std::to_string(pid)));
    }
    return Status::ok();
  }
  bool kill_all(std::chrono::milliseconds wait) override {
    const auto deadline = Clock::now() + wait;
    const fs::path& dir = unified_.empty() ? memory_ : unified_;
    if (unified_.empty() || !cgroup_write(unified_ / "cgroup.kill", "1").is_ok()) {
      // No cgroup.kill: kill every member until none is left (forks racing the kill are
      // caught by the next pass).
      while (Clock::now() < deadline) {
        auto pids = cgroup_members(dir);
        if (pids.empty()) break;
        for (pid_t pid : pids)
          ::kill(pid, SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return wait_cgroup_empty(dir, deadline);
  }
  void signal_all(int sig) override {
    for (pid_t pid : cgroup_members(unified_.empty() ? memory_ : unified_))
      ::kill(pid, sig);
  }
  JobCgroupStats stats() const override {
    JobCgroupStats s;
    s.memory_peak_bytes = cgroup_read_int(memory_ / "memory.max_usage_in_bytes");
    s.memory_current_bytes = cgroup_read_int(memory_ / "memory.usage_in_bytes");
    s.oom_kills = cgroup_read_keyed(memory_ / "memory.oom_control", "oom_kill");
    s.pids_max_hits = cgroup_read_keyed(pids_ / "pids.events", "max");
    s.pids_current = cgroup_read_int(pids_ / "pids.current");
    return s;
  }
  std::vector<pid_t> members() const override {
    return cgroup_members(unified_.empty() ? memory_ : unified_);
  }
  std::string name() const override { return name_; }

 private:
  fs::path memory_, pids_, unified_;
  std::string name_;
  std::shared_ptr<CgroupReaper> reaper_;
};

class HybridTree final : public CgroupTree {
 public:
  HybridTree(fs::path memory, fs::path pids, fs::path unified, std::shared_ptr<CgroupReaper> reaper)
      : memory_(std::move(memory)),
        pids_(std::move(pids)),
        unified_(std::move(unified)),
        locks_{InstanceLock(memory_), InstanceLock(pids_), InstanceLock(unified_)},
        reaper_(std::move(reaper)) {}
  ~HybridTree() override {
    std::vector<fs::path> dirs;
    for (const auto& d : {unified_, pids_, memory_})
      if (!d.empty()) dirs.push_back(d);
    reaper_->remove(dirs);  // after every job's (jobs go before the tree)
    reaper_->drain(CgroupReaper::kFinalWait);
  }
  StatusOr<std::unique_ptr<JobCgroup>> create_job(const std::string& name,
                                                  const CgroupLimits& limits) override {
    fs::path mem = memory_ / name;
    fs::path pid = pids_ / name;
    fs::path uni = unified_.empty() ? fs::path() : unified_ / name;
    for (const auto& d : {mem, pid, uni}) {
      if (!d.empty()) KF_RETURN_IF_ERROR(make_job_dir(d));
    }
    auto job = std::make_unique<HybridJob>(mem, pid, uni, name, reaper_);
    if (limits.memory_bytes > 0) {
      KF_RETURN_IF_ERROR(
          cgroup_write(mem / "memory.limit_in_bytes", std::to_string(limits.memory_bytes)));
      (void)cgroup_write(mem / "memory.oom_control", "0");  // the OOM killer acts in the group
    }
    if (limits.pids_max > 0) {
      KF_RETURN_IF_ERROR(cgroup_write(pid / "pids.max", std::to_string(limits.pids_max)));
    }
    return std::unique_ptr<JobCgroup>(std::move(job));
  }
  Json describe() const override {
    return {{"version", "hybrid"},
            {"path", memory_.string()},
            {"pids_path", pids_.string()},
            {"unified_path", unified_.string()},
            {"controllers", {"memory", "pids"}},
            {"removal", reaper_->status()}};
  }

 private:
  fs::path memory_, pids_, unified_;
  InstanceLock locks_[3];                 // held while this server lives
  std::shared_ptr<CgroupReaper> reaper_;  // destroyed (drained) before the locks go
};

Status make_dir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return errno_error("mkdir " + dir.string(), errno);
  }
  return Status::ok();
}

StatusOr<std::unique_ptr<CgroupTree>> make_v2(const CgroupOptions& o) {
  fs::path top = o.mount / "kforge";
  KF_RETURN_IF_ERROR(make_dir(top));
  std::string controllers = cgroup_read(o.mount / "cgroup.subtree_control");
  if (controllers.find("memory") == std::string::npos ||
      controllers.find("pids") == std::string::npos) {
    return unavailable("the root cgroup does not delegate the memory and pids controllers");
  }
  KF_RETURN_IF_ERROR(cgroup_write(top / "cgroup.subtree_control", "+memory +pids"));
  auto reaper = std::make_shared<CgroupReaper>();
  sweep_stale(top, o.instance, *reaper);
  fs::path base = top / o.instance;
  KF_RETURN_IF_ERROR(make_dir(base));
  KF_RETURN_IF_ERROR(cgroup_write(base / "cgroup.subtree_control", "+memory +pids"));
  return std::unique_ptr<CgroupTree>(std::make_unique<V2Tree>(base, std::move(reaper)));
}

StatusOr<std::unique_ptr<CgroupTree>> make_hybrid(const CgroupOptions& o) {
  fs::path mem_parent = o.mount / "memory" / own_cgroup_path("memory").substr(1);
  fs::path pids_parent = o.mount / "pids" / own_cgroup_path("pids").substr(1);
  if (!fs::exists(mem_parent / "memory.limit_in_bytes")) {
    return unavailable("no cgroup v1 memory controller at " + mem_parent.string());
  }
  if (!fs::exists(pids_parent / "pids.max") && !fs::exists(o.mount / "pids" / "cgroup.procs")) {
    return unavailable("no cgroup v1 pids controller under " + (o.mount / "pids").string());
  }
  fs::path uni_parent;
  if (fs::exists(o.mount / "unified" / "cgroup.procs")) {
    uni_parent = o.mount / "unified" / own_cgroup_path("").substr(1);
  }
  auto reaper = std::make_shared<CgroupReaper>();
  for (const auto& p : {mem_parent, pids_parent, uni_parent}) {
    if (!p.empty()) sweep_stale(p, o.instance, *reaper);
  }
  fs::path mem = mem_parent / o.instance;
  fs::path pids = pids_parent / o.instance;
  fs::path uni = uni_parent.empty() ? fs::path() : uni_parent / o.instance;
  KF_RETURN_IF_ERROR(make_dir(mem));
  KF_RETURN_IF_ERROR(make_dir(pids));
  if (!uni.empty() && !make_dir(uni).is_ok()) uni.clear();
  return std::unique_ptr<CgroupTree>(
      std::make_unique<HybridTree>(mem, pids, uni, std::move(reaper)));
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
    int64_t own = cgroup_read_int(mount / own_cgroup_path("").substr(1) / "memory.max");
    if (own > 0) limit = std::min(limit, own);
  } else {
    int64_t own = cgroup_read_int(mount / "memory" / own_cgroup_path("memory").substr(1) /
                                  "memory.limit_in_bytes");
    if (own > 0 && own < (int64_t{1} << 60)) limit = std::min(limit, own);
  }
  return limit / 4 * 3;
}

}  // namespace kforge::sandbox
