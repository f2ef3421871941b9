#include "kforge/common/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kforge/common/random.h"

namespace kforge {

StatusOr<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return errno_error("cannot open " + path.string(), errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::path tmp = path;
  tmp += ".tmp-" + random_hex(4);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("cannot create " + tmp.string(), errno);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return errno_error("cannot write " + tmp.string(), err);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return errno_error("cannot rename to " + path.string(), err);
  }
  return Status::ok();
}

Status make_dirs(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return io_error("cannot create directory " + path.string() + ": " + ec.message());
  return Status::ok();
}

Status remove_tree(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return io_error("cannot remove " + path.string() + ": " + ec.message());
  return Status::ok();
}

StatusOr<std::filesystem::path> self_executable() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return io_error("cannot resolve /proc/self/exe: " + ec.message());
  return p;
}

StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::acquire(const std::filesystem::path& dir) {
  KF_RETURN_IF_ERROR(make_dirs(dir));
  auto path = dir / "kforge.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("cannot open " + path.string(), errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    std::string holder = "another process";
    char buf[32] = {};
    if (::pread(fd, buf, sizeof(buf) - 1, 0) > 0) holder = "pid " + std::string(buf);
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return failed_precondition("data directory " + dir.string() + " is in use by " + holder +
                                 " (another kforge serve/mcp); use a different --data-dir");
    }
    return errno_error("cannot lock " + path.string(), err);
  }
  std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock itself is what matters; the pid is only for the message above.
  }
  return std::unique_ptr<DataDirLock>(new DataDirLock(fd));
}

DataDirLock::~DataDirLock() {
  ::close(fd_);
}

std::string find_program(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return ::access(program.c_str(), X_OK) == 0 ? program : std::string();
  }
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): read-only use
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::istringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir;
    candidate += '/';
    candidate += program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

}  // namespace kforge
