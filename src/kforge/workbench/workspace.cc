#include "kforge/workbench/workspace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "kforge/common/files.h"
#include "kforge/workbench/names.h"

namespace kforge::workbench {
namespace {

constexpr const char* kSubdirs[] = {"kernel", "tests", "log", "docs"};

// mkdir that refuses to reuse anything but a real directory (a symlink is not one).
Status ensure_dir(const std::filesystem::path& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) return Status::ok();
  if (errno != EEXIST) return errno_error("cannot create " + dir.string(), errno);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return errno_error("cannot inspect " + dir.string(), errno);
  if (!S_ISDIR(st.st_mode)) {
    return failed_precondition(dir.string() + " exists and is not a directory (or is a symlink)");
  }
  return Status::ok();
}

Status write_all(int fd, std::string_view content, const std::string& what) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error("cannot write " + what, errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

bool is_plain_file_name(const std::string& name) {
  if (name.size() < 4 || !name.ends_with(".py")) return false;
  for (char c : name.substr(0, name.size() - 3)) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

}  // namespace

StatusOr<Workspace> Workspace::create(const std::filesystem::path& root,
                                      const std::string& session_id) {
  if (!is_session_id(session_id)) return invalid_argument("bad session id '" + session_id + "'");
  KF_RETURN_IF_ERROR(make_dirs(root));
  const std::filesystem::path dir = root / session_id;
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno == EEXIST) return Status(ErrorCode::kAlreadyExists, dir.string() + " exists");
    return errno_error("cannot create " + dir.string(), errno);
  }
  return open(dir);
}

StatusOr<Workspace> Workspace::open(const std::filesystem::path& dir) {
  KF_RETURN_IF_ERROR(ensure_dir(dir));
  for (const char* sub : kSubdirs)
    KF_RETURN_IF_ERROR(ensure_dir(dir / sub));
  return Workspace(dir);
}

std::string Workspace::version_file(const std::string& name, int version) {
  return "kernel/" + name + "_v" + std::to_string(version) + ".py";
}

StatusOr<std::string> Workspace::write_version(const std::string& name, int version,
                                               std::string_view source) const {
  KF_ASSIGN_OR_RETURN(std::string checked, normalize_kernel_name(name));
  if (checked != name || version < 1) return invalid_argument("bad version file name");
  const std::string relative = version_file(name, version);
  const std::filesystem::path path = dir_ / relative;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      return Status(ErrorCode::kAlreadyExists,
                    path.string() + " already exists; versions are never overwritten");
    }
    return errno_error("cannot create " + path.string(), errno);
  }
  Status written = write_all(fd, source, path.string());
  if (written.is_ok() && ::fsync(fd) != 0)
    written = errno_error("cannot sync " + path.string(), errno);
  ::close(fd);
  if (!written.is_ok()) ::unlink(path.c_str());
  KF_RETURN_IF_ERROR(written);
  return relative;
}

Status Workspace::replace(const std::filesystem::path& relative, std::string_view content) const {
  return write_file_atomic(dir_ / relative, content);
}

StatusOr<std::string> Workspace::write_test(const std::string& file_name,
                                            std::string_view code) const {
  if (!is_plain_file_name(file_name)) return invalid_argument("bad test file name " + file_name);
  const std::string relative = "tests/" + file_name;
  KF_RETURN_IF_ERROR(replace(relative, code));
  return relative;
}

Status Workspace::append_log(const std::string& session_id, const Json& line) const {
  if (!is_session_id(session_id)) return invalid_argument("bad session id '" + session_id + "'");
  const std::filesystem::path path = dir_ / "log" / (session_id + ".jsonl");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("cannot open " + path.string(), errno);
  const std::string text = line.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  Status written = write_all(fd, text, path.string());
  ::close(fd);
  return written;
}

Status Workspace::write_dev_log(const std::string& name, std::string_view markdown) const {
  KF_ASSIGN_OR_RETURN(std::string checked, normalize_kernel_name(name));
  if (checked != name) return invalid_argument("bad kernel name " + name);
  return replace(std::filesystem::path("log") / (name + "_log.md"), markdown);
}

Status Workspace::write_summary(std::string_view markdown) const {
  return replace("docs/summarization.md", markdown);
}

}  // namespace kforge::workbench
