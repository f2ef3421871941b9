// Starting and stopping worker processes (fork + execve, no shell).
//
// The launched process gets exactly the descriptors in `fds` (mapped to the given numbers;
// every other descriptor is closed), its own session/process group (so a timeout kills
// everything it started), resource limits, a parent-death signal and an environment built
// only from `env` (callers build it from an allow-list, see worker_env.h).
//
// Thread-safety: `launch` may be called from any thread. A Process object is owned by one
// thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/status.h"

namespace kforge::worker_protocol {

// How a process ended: exactly one of exit_code / signal is set.
struct ExitStatus {
  std::optional<int> exit_code;
  std::optional<int> signal;

  // "exited with code 3", "killed by signal 11 (SIGSEGV)".
  std::string describe() const;
};

struct LaunchOptions {
  std::vector<std::string> argv;            // argv[0] is the program (absolute path or PATH lookup)
  std::map<std::string, std::string> env;   // the complete environment
  std::string working_dir;                  // empty: inherit
  std::map<int, int> fds;                   // child fd -> parent fd (e.g. {0: devnull, 3: sock})
  bool new_session = true;                  // setsid(): own process group
  bool die_with_parent = true;              // PR_SET_PDEATHSIG(SIGKILL)
  std::optional<uint64_t> rlimit_as_bytes;  // RLIMIT_AS
  std::optional<uint64_t> rlimit_nofile;    // RLIMIT_NOFILE
  std::optional<uint64_t> rlimit_core_bytes = 0;
  // Start the process as pid 1 of a new pid namespace (clone(CLONE_NEWPID) instead of fork):
  // it then sees no other process, and all it starts dies with it.
  bool new_pid_namespace = false;
};

// A launched child of this process.
class Process {
 public:
  Process() = default;
  Process(pid_t pid, int pidfd) : pid_(pid), pidfd_(pidfd) {}
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  // Kills the process group and reaps the process if it is still running.
  ~Process();

  pid_t pid() const { return pid_; }
  bool valid() const { return pid_ > 0; }
  // A descriptor that becomes readable when the process exits (pidfd), or -1.
  int exit_fd() const { return pidfd_; }

  // SIGKILL to the whole process group (the process is its group leader).
  void kill_group();
  // Non-blocking: the exit status if the process has exited (and reaps it).
  std::optional<ExitStatus> try_wait();
  // Waits up to `timeout` for the exit; nullopt on timeout.
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  // kill_group() and wait_for(timeout) if the process is still running (the destructor's
  // end, for a caller that must know it is over before it goes on).
  void kill_and_wait(std::chrono::milliseconds timeout);

 private:
  void close_pidfd();
  pid_t pid_ = -1;
  int pidfd_ = -1;
  std::optional<ExitStatus> exited_;
};

StatusOr<Process> launch_process(const LaunchOptions& options);

// SIGKILL to the process group `pgid` (ignores ESRCH).
void kill_process_group(pid_t pgid);

// Resident memory of every process whose process group is `pgid`, in bytes (0 if none).
int64_t process_group_rss_bytes(pid_t pgid);
// Proportional set size of the same processes (pages shared copy-on-write with the zygote
// count once, divided among their sharers), from /proc/<pid>/smaps_rollup.
int64_t process_group_pss_bytes(pid_t pgid);

}  // namespace kforge::worker_protocol
