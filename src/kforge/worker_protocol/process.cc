#include "kforge/worker_protocol/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kforge/common/files.h"

namespace kforge::worker_protocol {
namespace {

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  long fd = syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) {
    ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
    return static_cast<int>(fd);
  }
#endif
  (void)pid;
  return -1;
}

ExitStatus from_wait_status(int status) {
  ExitStatus s;
  if (WIFEXITED(status))
    s.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    s.signal = WTERMSIG(status);
  else
    s.exit_code = -1;
  return s;
}

// Everything the forked child needs, prepared before fork() so the child only makes
// async-signal-safe calls.
struct PreparedLaunch {
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<std::pair<int, int>> fd_map;  // (child fd, parent fd)
  std::vector<int> temps;                   // sized before fork: no allocation in the child
  int max_target = 2;
};

[[noreturn]] void child_fail(int report_fd, int err) {
  ssize_t ignored = ::write(report_fd, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

[[noreturn]] void run_child(const LaunchOptions& o, PreparedLaunch& p, int report_fd) {
  // After fork only this thread exists, so the process-wide calls below are safe.
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);  // NOLINT(concurrency-mt-unsafe)
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
  }
  if (o.new_session && setsid() < 0) child_fail(report_fd, errno);
  if (o.die_with_parent) prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Two passes so a source descriptor is never clobbered by an earlier dup2.
  constexpr int kTempBase = 900;
  std::vector<int>& temps = p.temps;
  for (size_t i = 0; i < p.fd_map.size(); ++i) {
    temps[i] = fcntl(p.fd_map[i].second, F_DUPFD, kTempBase);
    if (temps[i] < 0) child_fail(report_fd, errno);
  }
  int report = fcntl(report_fd, F_DUPFD_CLOEXEC, kTempBase + 64);
  if (report < 0) child_fail(report_fd, errno);
  report_fd = report;
  for (size_t i = 0; i < p.fd_map.size(); ++i) {
    if (dup2(temps[i], p.fd_map[i].first) < 0) child_fail(report_fd, errno);
  }
  // Close everything else except the exec-error pipe (close-on-exec).
  for (int fd = p.max_target + 1; fd < report_fd; ++fd)
    close(fd);
  syscall(SYS_close_range, static_cast<unsigned>(report_fd) + 1, ~0U, 0);
  for (int fd = 0; fd <= p.max_target; ++fd) {
    bool mapped = false;
    for (const auto& m : p.fd_map)
      mapped = mapped || m.first == fd;
    if (!mapped) {
      int devnull = open("/dev/null", O_RDWR);
      if (devnull >= 0 && devnull != fd) {
        dup2(devnull, fd);
        close(devnull);
      }
    }
  }
  struct rlimit rl {};
  if (o.rlimit_as_bytes) {
    rl.rlim_cur = rl.rlim_max = *o.rlimit_as_bytes;
    setrlimit(RLIMIT_AS, &rl);
  }
  if (o.rlimit_nofile) {
    rl.rlim_cur = rl.rlim_max = *o.rlimit_nofile;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (o.rlimit_core_bytes) {
    rl.rlim_cur = rl.rlim_max = *o.rlimit_core_bytes;
    setrlimit(RLIMIT_CORE, &rl);
  }
  if (!o.working_dir.empty() && chdir(o.working_dir.c_str()) != 0) child_fail(report_fd, errno);
  execve(p.argv[0], p.argv.data(), p.envp.data());
  child_fail(report_fd, errno);
}

}  // namespace

std::string ExitStatus::describe() const {
  if (exit_code) return "exited with code " + std::to_string(*exit_code);
  if (signal) {
    const char* abbrev = sigabbrev_np(*signal);
    return "killed by signal " + std::to_string(*signal) +
           (abbrev != nullptr ? " (SIG" + std::string(abbrev) + ")" : std::string());
  }
  return "ended for an unknown reason";
}

Process::Process(Process&& other) noexcept
    : pid_(other.pid_), pidfd_(other.pidfd_), exited_(other.exited_) {
  other.pid_ = -1;
  other.pidfd_ = -1;
}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    this->~Process();
    pid_ = other.pid_;
    pidfd_ = other.pidfd_;
    exited_ = other.exited_;
    other.pid_ = -1;
    other.pidfd_ = -1;
  }
  return *this;
}

Process::~Process() {
  kill_and_wait(std::chrono::milliseconds(2000));
  close_pidfd();
}

void Process::kill_and_wait(std::chrono::milliseconds timeout) {
  if (pid_ > 0 && !exited_) {
    kill_group();
    (void)wait_for(timeout);
  }
}

void Process::close_pidfd() {
  if (pidfd_ >= 0) ::close(pidfd_);
  pidfd_ = -1;
}

void Process::kill_group() {
  if (pid_ <= 0 || exited_) return;
  kill_process_group(pid_);
  ::kill(pid_, SIGKILL);
}

std::optional<ExitStatus> Process::try_wait() {
  if (exited_) return exited_;
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exited_ = from_wait_status(status);
    close_pidfd();
  } else if (r < 0 && errno == ECHILD) {
    exited_ = ExitStatus{std::nullopt, std::nullopt};
  }
  return exited_;
}

std::optional<ExitStatus> Process::wait_for(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (auto s = try_wait()) return s;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    if (pidfd_ >= 0) {
      pollfd pfd{pidfd_, POLLIN, 0};
      ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    } else {
      ::usleep(5000);
    }
  }
}

StatusOr<Process> launch_process(const LaunchOptions& o) {
  if (o.argv.empty()) return invalid_argument("launch_process: empty argv");
  PreparedLaunch p;
  std::string program = find_program(o.argv[0]);
  if (program.empty()) return unavailable("program not found: " + o.argv[0]);
  std::vector<std::string> argv_storage = o.argv;
  argv_storage[0] = program;
  for (auto& a : argv_storage)
    p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  for (const auto& [k, v] : o.env) {
    std::string entry = k;
    entry += '=';
    entry += v;
    p.env_storage.push_back(std::move(entry));
  }
  for (auto& e : p.env_storage)
    p.envp.push_back(e.data());
  p.envp.push_back(nullptr);
  for (const auto& [child_fd, parent_fd] : o.fds) {
    p.fd_map.emplace_back(child_fd, parent_fd);
    p.max_target = std::max(p.max_target, child_fd);
  }
  p.temps.assign(p.fd_map.size(), -1);

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return errno_error("pipe2", errno);
  pid_t pid = o.new_pid_namespace ? static_cast<pid_t>(::syscall(SYS_clone, CLONE_NEWPID | SIGCHLD,
                                                                 nullptr, nullptr, nullptr, 0))
                                  : ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(report[0]);
    ::close(report[1]);
    return errno_error("fork", err);
  }
  if (pid == 0) {
    ::close(report[0]);
    run_child(o, p, report[1]);
  }
  ::close(report[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == sizeof(child_errno)) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return errno_error("cannot start " + program, child_errno);
  }
  return Process(pid, open_pidfd(pid));
}

void kill_process_group(pid_t pgid) {
  if (pgid <= 1) return;  // never signal our own or init's group by accident
  ::kill(-pgid, SIGKILL);
}

namespace {

// Calls `visit(base)` for every /proc/<pid> whose process group is `pgid`.
template <typename Visit>
void for_each_in_group(pid_t pgid, Visit&& visit) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return;
  while (dirent* e = ::readdir(proc)) {  // NOLINT(concurrency-mt-unsafe): DIR* is ours
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string base = std::string("/proc/") + e->d_name;
    std::ifstream stat(base + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    long ppid = 0;
    long pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid) visit(base);
  }
  ::closedir(proc);
}

}  // namespace

int64_t process_group_pss_bytes(pid_t pgid) {
  int64_t total = 0;
  for_each_in_group(pgid, [&](const std::string& base) {
    std::ifstream rollup(base + "/smaps_rollup");
    std::string key;
    int64_t kib = 0;
    std::string unit;
    while (rollup >> key) {
      if (key == "Pss:" && rollup >> kib >> unit) {
        total += kib * 1024;
        return;
      }
      std::string rest_of_line;
      std::getline(rollup, rest_of_line);
    }
  });
  return total;
}

int64_t process_group_rss_bytes(pid_t pgid) {
  static const long page = sysconf(_SC_PAGESIZE);
  int64_t total = 0;
  for_each_in_group(pgid, [&](const std::string& base) {
    std::ifstream statm(base + "/statm");
    long size = 0;
    long resident = 0;
    if (statm >> size >> resident) total += static_cast<int64_t>(resident) * page;
  });
  return total;
}

}  // namespace kforge::worker_protocol
