#include "kforge/sandbox/cgroup_reaper.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <optional>
#include <thread>

#include "kforge/common/errno_message.h"
#include "kforge/common/log.h"
#include "kforge/sandbox/cgroup_io.h"

namespace kforge::sandbox {
namespace {

namespace fs = std::filesystem;
using ReaperClock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kRetryEvery{20};
constexpr std::chrono::seconds kWarnAfter{10};

// Whether a server still owns `dir` (kforge-<pid>): its lock is held, or (a server of a
// version that took none) `pid` is a running kforge.
bool owned_by_a_live_server(const fs::path& dir, pid_t pid) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    ::close(fd);
    if (held) return true;
  }
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno != EPERM)) return false;
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  return std::getline(comm, name) && name.starts_with("kforge");
}

std::vector<fs::path> child_cgroups(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory(ec)) out.push_back(entry.path());
  }
  return out;
}

}  // namespace

CgroupReaper::CgroupReaper() : thread_([this] { loop(); }) {}

CgroupReaper::~CgroupReaper() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CgroupReaper::remove(const std::vector<fs::path>& dirs) {
  std::vector<Entry> left;
  for (const auto& dir : dirs) {
    kill_cgroup_members(dir);
    if (!remove_cgroup_once(dir)) left.push_back({dir, ReaperClock::now()});
  }
  if (left.empty()) return;
  {
    MutexLock lock(mu_);
    queue_.insert(queue_.end(), left.begin(), left.end());
  }
  cv_.notify_all();
}

bool CgroupReaper::drain(std::chrono::milliseconds wait) {
  MutexLock lock(mu_);
  return lock.wait_for(cv_, wait, [this]() REQUIRES(mu_) { return queue_.empty() && !busy_; });
}

Json CgroupReaper::status() const {
  MutexLock lock(mu_);
  return {{"pending", queue_.size()}, {"removed_late", removed_late_}};
}

void CgroupReaper::loop() {
  MutexLock lock(mu_);
  std::optional<ReaperClock::time_point> give_up;
  for (;;) {
    lock.wait(cv_, [this]() REQUIRES(mu_) { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    if (stop_ && !give_up) give_up = ReaperClock::now() + kFinalWait;
    if (give_up && ReaperClock::now() > *give_up) {
      for (const auto& e : queue_) {
        KF_LOG_WARN("cgroup {} could not be removed: its processes did not end", e.dir.string());
      }
      queue_.clear();
      cv_.notify_all();
      return;
    }
    std::deque<Entry> work;
    work.swap(queue_);
    busy_ = true;
    lock.unlock();
    // In queue order, so a parent queued after its children goes once they have.
    uint64_t removed = 0;
    std::deque<Entry> left;
    for (auto& e : work) {
      kill_cgroup_members(e.dir);  // a v1 cgroup has no cgroup.kill: late forks die here
      if (remove_cgroup_once(e.dir)) {
        ++removed;
        continue;
      }
      if (!e.warned && ReaperClock::now() - e.since > kWarnAfter) {
        KF_LOG_WARN("cgroup {} is still not empty {} s after its job ended; retrying",
                    e.dir.string(), kWarnAfter.count());
        e.warned = true;
      }
      left.push_back(std::move(e));
    }
    lock.lock();
    busy_ = false;
    removed_late_ += removed;
    queue_.insert(queue_.begin(), left.begin(), left.end());
    cv_.notify_all();
    if (!queue_.empty()) lock.wait_for(cv_, kRetryEvery);
  }
}

InstanceLock::InstanceLock(const fs::path& dir)
    : fd_(dir.empty() ? -1 : ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
  if (fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    KF_LOG_WARN("cgroup {}: cannot lock it ({}); a later server may sweep it", dir.string(),
                errno_message(errno));
  }
}

InstanceLock::~InstanceLock() {
  if (fd_ >= 0) ::close(fd_);
}

void sweep_stale(const fs::path& parent, const std::string& own_instance, CgroupReaper& reaper) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("kforge-") || !entry.is_directory(ec)) continue;
    if (name == own_instance) {
      // A server with this pid before a restart: its jobs' names come again, so their
      // cgroups go now, not later (the reaper could otherwise kill a new job of that name).
      for (const auto& job : child_cgroups(entry.path())) {
        kill_cgroup_members(job);
        wait_cgroup_empty(job, ReaperClock::now() + std::chrono::seconds(5));
        for (int i = 0; i < 100 && !remove_cgroup_once(job); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
      continue;
    }
    pid_t pid = 0;
    const char* digits = name.data() + 7;
    if (std::from_chars(digits, name.data() + name.size(), pid).ptr != name.data() + name.size()) {
      continue;  // not kforge-<pid>
    }
    if (owned_by_a_live_server(entry.path(), pid)) continue;
    KF_LOG_INFO("removing the cgroups a kforge server that is gone left in {}",
                entry.path().string());
    std::vector<fs::path> dirs = child_cgroups(entry.path());
    dirs.push_back(entry.path());
    reaper.remove(dirs);
  }
}

}  // namespace kforge::sandbox
