// The jail's minimal root (sandbox/root_fs.h), built in a forked child as root: only what the
// spec names is there, the root and read-only binds cannot be written, the private tmpfs can
// (up to its size), symlinks on the way to a bound path are made again, hidden paths are
// empty. Skipped where the test does not run as root.
#include "kforge/sandbox/root_fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kforge::sandbox {
namespace {

namespace fs = std::filesystem;

// Runs `check` in a child that has built `spec`'s root; the child's first failed check (its
// line) comes back as the exit code, 0 when all passed.
int in_root(const JailSpec& spec, int (*check)()) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    Json report;
    if (::unshare(CLONE_NEWNS) != 0 || !build_root(spec, report).is_ok()) ::_exit(254);
    ::_exit(check());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool exists(const char* path) {
  struct stat st {};
  return ::lstat(path, &st) == 0;
}

bool empty_dir(const char* path) {
  std::error_code ec;
  return fs::is_empty(path, ec) && !ec;
}

bool non_empty_dir(const char* path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && !fs::is_empty(path, ec) && !ec;
}

#define CHECK_OR_LINE(cond) \
  if (!(cond)) return __LINE__ % 250 + 1

int check_minimal_root() {
  CHECK_OR_LINE(!exists("/etc/passwd") && !exists("/home") && !exists("/var"));
  CHECK_OR_LINE(exists("/usr/bin/env") && exists("/etc/hosts"));
  std::ifstream hosts("/etc/hosts");
  std::string line;
  CHECK_OR_LINE(std::getline(hosts, line) && line == "127.0.0.1 localhost");
  // The root and the read-only binds refuse writes; so does a file on them.
  CHECK_OR_LINE(::mkdir("/new", 0755) != 0 && errno == EROFS);
  CHECK_OR_LINE(::open("/usr/bin/kforge-test", O_CREAT | O_WRONLY, 0644) < 0 && errno == EROFS);
  // The private tmpfs takes writes up to its size.
  const int fd = ::open("/tmp/fill", O_CREAT | O_WRONLY, 0644);
  CHECK_OR_LINE(fd >= 0);
  std::string mib(1 << 20, 'x');
  int written = 0;
  while (written < 8 && ::write(fd, mib.data(), mib.size()) == static_cast<ssize_t>(mib.size())) {
    ++written;
  }
  CHECK_OR_LINE(written == 2);
  ::close(fd);
  // Devices work; the hidden directory is an empty tmpfs; the link is there; /proc is new.
  const int null = ::open("/dev/null", O_WRONLY);
  CHECK_OR_LINE(null >= 0 && ::write(null, "x", 1) == 1);
  CHECK_OR_LINE(!exists("/usr/share/doc") || empty_dir("/usr/share/doc"));
  CHECK_OR_LINE(non_empty_dir("/usr/share"));
  std::error_code ec;
  CHECK_OR_LINE(fs::read_symlink("/dev/fd", ec) == "/proc/self/fd");
  CHECK_OR_LINE(exists("/proc/self/status") && exists("/sys/kernel"));
  CHECK_OR_LINE(!exists("/sys/fs/cgroup/memory") && !exists("/sys/fs/cgroup/cgroup.procs"));
  return 0;
}

TEST(JailRootTest, HoldsOnlyWhatTheSpecNames) {
  if (::geteuid() != 0) GTEST_SKIP() << "building a root needs root";
  JailSpec spec;
  spec.read_only = {"/usr/bin", "/usr/lib", "/usr/share",     "/lib",
                    "/lib64",   "/bin",     "/does/not/exist"};
  spec.devices = {"/dev/null"};
  spec.tmpfs = {{"/tmp", 2 << 20, 01777, std::nullopt, std::nullopt}};
  spec.files = {{"/etc/hosts", "127.0.0.1 localhost\n"}};
  spec.links = {{"/dev/fd", "/proc/self/fd"}};
  spec.hide = {"/usr/share/doc", "/sys/fs/cgroup"};
  EXPECT_EQ(in_root(spec, check_minimal_root), 0) << "the failing check's line (mod 250) + 1";
}

int check_symlinks_made_again() {
  // /lib -> usr/lib on merged-/usr systems: the link is there and leads to the bound files.
  CHECK_OR_LINE(exists("/lib") && non_empty_dir("/lib/"));
  CHECK_OR_LINE(!exists("/usr/bin"));  // only what the spec names
  return 0;
}

TEST(JailRootTest, SymlinksOnTheWayAreMadeAgain) {
  if (::geteuid() != 0) GTEST_SKIP() << "building a root needs root";
  JailSpec spec;
  spec.read_only = {"/lib"};
  spec.mount_proc = false;
  spec.bind_sys = false;
  EXPECT_EQ(in_root(spec, check_symlinks_made_again), 0);
}

TEST(JailRootTest, APathThroughAnAbsoluteSymlinkOfTheRootIsRefusedNotFollowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "building a root needs root";
  // `host/link -> <outside>` is made again in the root; before pivot_root, a directory made
  // through it would land in the host's <outside>.
  // Outside /tmp, which the staging root covers in the child.
  const fs::path host = fs::path("/var/tmp") / ("kforge-root-link-" + std::to_string(getpid()));
  const fs::path outside = host / "outside";
  fs::create_directories(outside);
  fs::create_directory_symlink(outside, host / "link");
  { std::ofstream(outside / "file") << "x"; }
  JailSpec spec;
  spec.read_only = {(host / "link" / "file").string()};
  spec.tmpfs = {{(host / "link" / "made").string(), 1 << 20, 0755, std::nullopt, std::nullopt}};
  spec.mount_proc = false;
  spec.bind_sys = false;
  EXPECT_EQ(in_root(spec, [] { return 0; }), 254);  // the root was not built
  EXPECT_FALSE(fs::exists(outside / "made"));
  fs::remove_all(host);
}

}  // namespace
}  // namespace kforge::sandbox
