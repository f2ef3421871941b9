// Job cgroups are removed for good, without making anyone wait for it (docs/security.md
// "Memory, processes and the job's end").
//
// A cgroup directory can go only once the kernel has reaped its last process. After
// cgroup.kill that takes milliseconds for a normal job, but seconds for one that forked up
// to pids.max (each process tears down its copy of a large address space). remove() kills
// what is left and tries once; a directory that is not empty yet is retried by the reaper's
// thread until it is gone (its members killed again each time: a v1 cgroup has no
// cgroup.kill), so neither a job's answer nor its teardown waits on it, and none is left.
//
// At start, sweep_stale() removes what servers that are gone left behind: below a parent
// (kforge/ on v2; the server's own cgroup of each v1 hierarchy and of the unified tree),
// every kforge-<pid> directory that no live server holds, i.e. whose lock (InstanceLock,
// taken by every server on its own directory) is free and whose pid is not a running kforge
// (a server of a version without the lock) — a pid reused by another program does not keep
// it — and every job cgroup already in this server's own directory (a server that had the
// same pid before a restart).
//
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/thread_annotations.h"

namespace kforge::sandbox {

class CgroupReaper {
 public:
  CgroupReaper();
  // Keeps trying for at most `kFinalWait` what is still queued, then gives up with a warning.
  ~CgroupReaper();
  CgroupReaper(const CgroupReaper&) = delete;
  CgroupReaper& operator=(const CgroupReaper&) = delete;

  // Kills the members of each of `dirs` and removes them, now or, when one is not empty
  // yet, from the reaper's thread (in this order: a parent after its children).
  void remove(const std::vector<std::filesystem::path>& dirs);
  // Blocks until nothing is queued, or `wait` passed; true when nothing is.
  bool drain(std::chrono::milliseconds wait);
  // {"pending": N, "removed_late": N}: directories waiting, and removed by the thread.
  Json status() const;

  static constexpr std::chrono::seconds kFinalWait{10};

 private:
  struct Entry {
    std::filesystem::path dir;
    std::chrono::steady_clock::time_point since;  // when it was first tried
    bool warned = false;
  };
  void loop();

  mutable Mutex mu_;
  std::condition_variable cv_;  // queued, stopping, or a round done
  std::deque<Entry> queue_ GUARDED_BY(mu_);
  bool busy_ GUARDED_BY(mu_) = false;  // the thread holds a round of `queue_` outside the lock
  uint64_t removed_late_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is initialised
};

// An exclusive lock on a server's own cgroup directory, held while it lives (a lock on an
// open descriptor: it is free as soon as the server is gone, however it ended). An empty
// path locks nothing.
class InstanceLock {
 public:
  explicit InstanceLock(const std::filesystem::path& dir);
  InstanceLock(InstanceLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ~InstanceLock();
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;

 private:
  int fd_ = -1;
};

// Queues on `reaper` the removal of every stale kforge-<pid> directory below `parent`, and of
// every job cgroup in `parent`/`own_instance` (see the file comment).
void sweep_stale(const std::filesystem::path& parent, const std::string& own_instance,
                 CgroupReaper& reaper);

}  // namespace kforge::sandbox
