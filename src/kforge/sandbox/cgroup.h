// One cgroup per job process tree (docs/security.md "Memory, processes and the job's end").
//
// Every process a job starts, whatever it does with sessions or process groups, stays in
// the job's cgroup: the kernel accounts its memory there (memory.max, OOM kill of the whole
// group), counts its processes (pids.max) and the supervisor kills the whole group at the
// job's end, timeout or cancel (cgroup.kill; on cgroup v1 a freeze-and-kill loop).
//
// Layouts:
// - cgroup v2 (a cgroup2 file system on /sys/fs/cgroup, GPU hosts): kforge makes
//   <mount>/kforge/<instance>/ (no process lives there; +memory +pids are enabled down the
//   tree) and one child per job. The root cgroup is exempt from the no-internal-process rule,
//   so the tree hangs off the root, not off the server's own cgroup.
// - hybrid (v1 controllers + a cgroup2 "unified" tree, this CI machine): the job's cgroup is
//   made in the v1 memory and pids hierarchies below the server's own cgroup there, and in
//   the unified tree (for cgroup.kill and cgroup.events).
//
// At start, what servers that are gone left behind is removed (cgroup_reaper.h sweep_stale).
//
// Thread-safety: a CgroupTree may be used from any thread; a JobCgroup by one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::sandbox {

struct CgroupLimits {
  int64_t memory_bytes = 0;  // memory.max; 0 = no limit
  int64_t pids_max = 0;      // pids.max; 0 = no limit
};

struct JobCgroupStats {
  int64_t memory_peak_bytes = 0;     // memory.peak / memory.max_usage_in_bytes
  int64_t memory_current_bytes = 0;  // memory.current / memory.usage_in_bytes
  int64_t oom_kills = 0;             // memory.events oom_kill / memory.oom_control oom_kill
  int64_t pids_max_hits = 0;         // pids.events max
  int64_t pids_current = 0;
};

// The cgroup of one job (or one warm worker process that will run one job).
class JobCgroup {
 public:
  virtual ~JobCgroup() = default;
  // Moves `pid` (and so every future child of it) into the cgroup.
  virtual Status attach(pid_t pid) = 0;
  // Sends SIGKILL to every process in the cgroup and waits (bounded) until it is empty.
  // True when it emptied in time.
  virtual bool kill_all(std::chrono::milliseconds wait) = 0;
  // Sends `sig` to every process in the cgroup now (no wait); SIGSTOP/SIGCONT of pipelined
  // stages (docs/architecture.md "Pipelined stages").
  virtual void signal_all(int sig) = 0;
  virtual JobCgroupStats stats() const = 0;
  // The processes in it now (cgroup.procs: thread-group leaders, no threads).
  virtual std::vector<pid_t> members() const = 0;
  virtual std::string name() const = 0;
};

class CgroupTree {
 public:
  virtual ~CgroupTree() = default;
  // A new, empty job cgroup with the limits applied. Its destructor kills what is left in it
  // and removes it, at once or, while the kernel still reaps its processes, from the tree's
  // reaper thread (cgroup_reaper.h): it never waits, and no directory is left behind.
  virtual StatusOr<std::unique_ptr<JobCgroup>> create_job(const std::string& name,
                                                          const CgroupLimits& limits) = 0;
  // {"version": "v2"|"hybrid", "path": ..., "controllers": [...]} for /health.
  virtual Json describe() const = 0;
};

struct CgroupOptions {
  std::filesystem::path mount = "/sys/fs/cgroup";
  std::string instance;  // unique per server process (e.g. "kforge-<pid>")
};

// Detects the layout and makes the server's subtree. kUnavailable (with the reason) where
// cgroups cannot be managed here (no write access, no memory/pids controller).
StatusOr<std::unique_ptr<CgroupTree>> make_cgroup_tree(const CgroupOptions& options);

// The memory a job may use by default: 3/4 of the smaller of the machine's memory and the
// server's own cgroup memory limit (v2 memory.max or v1 memory.limit_in_bytes, where set).
int64_t default_job_memory_bytes(const std::filesystem::path& mount = "/sys/fs/cgroup");

}  // namespace kforge::sandbox
