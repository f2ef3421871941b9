#include "kforge/sandbox/root_fs.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <memory>
#include <set>

#include "kforge/common/errno_message.h"

namespace kforge::sandbox {
namespace {

namespace fs = std::filesystem;

// Where the new root is assembled: a tmpfs mounted on this mount namespace's /tmp (every
// source is open by then, so what the host has under /tmp stays reachable).
constexpr const char* kStaging = "/tmp";

// mount_setattr(2) (Linux 5.12), spelled out: glibc before 2.36 has no declarations.
struct MountAttr {
  uint64_t attr_set = 0;
  uint64_t attr_clr = 0;
  uint64_t propagation = 0;
  uint64_t userns_fd = 0;
};
constexpr uint64_t kAttrReadOnly = 0x1;
constexpr uint64_t kAttrNoSuid = 0x2;
constexpr uint64_t kAttrNoDev = 0x4;
constexpr unsigned kAtRecursive = 0x8000;
#ifdef SYS_mount_setattr
constexpr long kMountSetattr = SYS_mount_setattr;
#else
constexpr long kMountSetattr = 442;  // x86_64
#endif

Status root_error(std::string_view step, int err, std::string_view path) {
  return errno_error("sandbox: " + std::string(step) + " (" + std::string(path) + ")", err);
}

// A mount source opened before the root is built, closed when the root is done.
class Source {
 public:
  static StatusOr<std::shared_ptr<Source>> open(const std::string& path) {
    auto s = std::shared_ptr<Source>(new Source(path));
    s->fd_ = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (s->fd_ < 0) return root_error("open", errno, path);
    struct stat st {};
    if (::fstat(s->fd_, &st) != 0) return root_error("stat", errno, path);
    s->is_dir_ = S_ISDIR(st.st_mode);
    return s;
  }
  ~Source() {
    if (fd_ >= 0) ::close(fd_);
  }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  bool is_dir() const { return is_dir_; }
  const std::string& path() const { return path_; }
  std::string fd_path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  explicit Source(std::string path) : path_(std::move(path)) {}
  std::string path_;
  int fd_ = -1;
  bool is_dir_ = false;
};

// One step of building the root; `target` is its path in the new root.
struct Op {
  enum class Kind { kReadOnly, kSys, kDevice, kBind, kHide, kTmpfs, kFile, kLink, kProc };
  Op(Kind k, std::string t, std::shared_ptr<Source> s = nullptr, std::string x = {}, bool w = false)
      : kind(k), target(std::move(t)), source(std::move(s)), text(std::move(x)), writable(w) {}
  Kind kind;
  std::string target;
  std::shared_ptr<Source> source;  // binds
  std::string text;                // file content, link target, tmpfs options
  bool writable = false;           // kBind
};

bool is_under(const std::string& path, const std::string& dir) {
  if (path == dir || dir == "/") return true;
  return path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/';
}

// Resolves `path` component by component on the host; the symlinks met on the way are added
// to `links` (their path -> their target). The canonical path, or "" when it does not exist.
std::string resolve(const std::string& path, std::map<std::string, std::string>& links) {
  std::deque<std::string> todo;
  for (const auto& part : fs::path(path).lexically_normal().relative_path()) {
    todo.push_back(part.string());
  }
  std::string current;  // "" is "/"
  for (int hops = 0; !todo.empty();) {
    std::string part = std::move(todo.front());
    todo.pop_front();
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      current = fs::path(current).parent_path().string();
      if (current == "/") current.clear();
      continue;
    }
    std::string next = current;
    next += '/';
    next += part;
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0) return {};
    if (!S_ISLNK(st.st_mode)) {
      current = next;
      continue;
    }
    if (++hops > 40) return {};
    std::error_code ec;
    const fs::path text = fs::read_symlink(next, ec);
    if (ec) return {};
    links[next] = text.string();
    if (text.is_absolute()) current.clear();
    std::deque<std::string> parts;
    for (const auto& p : text.relative_path()) {
      parts.push_back(p.string());
    }
    todo.insert(todo.begin(), parts.begin(), parts.end());
  }
  return current.empty() ? "/" : current;
}

std::string tmpfs_options(const TmpfsMount& t) {
  char mode[16];
  std::snprintf(mode, sizeof(mode), "%o", t.mode & 07777U);
  std::string o = "mode=" + std::string(mode) + ",size=" + std::to_string(t.size_bytes) +
                  ",nr_inodes=" + std::to_string(std::max<uint64_t>(t.size_bytes >> 14, 1024));
  if (t.uid) o += ",uid=" + std::to_string(*t.uid);
  if (t.gid) o += ",gid=" + std::to_string(*t.gid);
  return o;
}

// What to do, in path order. Read-only paths: their symlinks made again, their canonical
// path bound; none at or below a hidden path; none inside another read-only path (the bind
// above already shows it).
StatusOr<std::vector<Op>> plan(const JailSpec& spec, Json& report) {
  std::vector<Op> ops;
  const auto hidden = [&](const std::string& p) {
    return std::any_of(spec.hide.begin(), spec.hide.end(),
                       [&](const std::string& h) { return is_under(p, h); });
  };
  std::map<std::string, std::string> links;
  std::set<std::string> read_only;
  Json missing = Json::array(), skipped = Json::array();
  for (const auto& p : spec.read_only) {
    std::map<std::string, std::string> found;
    const std::string real = resolve(p, found);
    if (real.empty()) {
      missing.push_back(p);
    } else if (real == "/" || hidden(real)) {
      skipped.push_back(p);
    } else {
      read_only.insert(real);
      links.insert(found.begin(), found.end());
    }
  }
  const auto inside_read_only = [&](const std::string& p) {
    return std::any_of(read_only.begin(), read_only.end(),
                       [&](const std::string& r) { return p != r && is_under(p, r); });
  };
  for (const auto& real : read_only) {
    if (inside_read_only(real)) continue;
    KF_ASSIGN_OR_RETURN(auto source, Source::open(real));
    ops.emplace_back(Op::Kind::kReadOnly, real, std::move(source));
  }
  for (const auto& [path, target] : links) {
    if (!inside_read_only(path)) ops.emplace_back(Op::Kind::kLink, path, nullptr, target);
  }
  for (const auto& [path, target] : spec.links) {
    ops.emplace_back(Op::Kind::kLink, path, nullptr, target);
  }
  for (const auto& d : spec.devices) {
    if (::access(d.c_str(), F_OK) != 0) continue;  // not on this host (e.g. no GPU)
    KF_ASSIGN_OR_RETURN(auto source, Source::open(d));
    ops.emplace_back(Op::Kind::kDevice, d, std::move(source));
  }
  for (const auto& b : spec.binds) {
    KF_ASSIGN_OR_RETURN(auto source, Source::open(b.source));
    ops.emplace_back(Op::Kind::kBind, b.target, std::move(source), std::string(), b.writable);
  }
  for (const auto& h : spec.hide) {
    ops.emplace_back(Op::Kind::kHide, h, nullptr, "mode=0755,size=4096,nr_inodes=16");
  }
  for (const auto& t : spec.tmpfs) {
    ops.emplace_back(Op::Kind::kTmpfs, t.path, nullptr, tmpfs_options(t));
  }
  for (const auto& [path, content] : spec.files) {
    ops.emplace_back(Op::Kind::kFile, path, nullptr, content);
  }
  if (spec.bind_sys) {
    KF_ASSIGN_OR_RETURN(auto sys, Source::open("/sys"));
    ops.emplace_back(Op::Kind::kSys, "/sys", std::move(sys));
  }
  if (spec.mount_proc) ops.emplace_back(Op::Kind::kProc, "/proc");
  // Parents before children: a path sorts before every path below it.
  std::stable_sort(ops.begin(), ops.end(),
                   [](const Op& a, const Op& b) { return a.target < b.target; });
  report["missing"] = missing;
  report["hidden"] = skipped;
  return ops;
}

// mkdir -p of `dir`, a path below the staging root; what it makes is 0711 (searchable, not
// listable). No component may be a symlink: before pivot_root, an absolute link made in the
// root (a venv's bin/python3) would lead out of it, into the host's file system.
Status make_dirs_in_root(const fs::path& dir) {
  const fs::path relative = dir.lexically_relative(kStaging);
  if (relative.empty() || *relative.begin() == "..")
    return root_error("mkdir", EINVAL, dir.string());
  fs::path current = kStaging;
  for (const auto& part : relative) {
    if (part == ".") continue;
    current /= part;
    struct stat st {};
    if (::lstat(current.c_str(), &st) == 0) {
      if (S_ISLNK(st.st_mode)) {
        return invalid_argument("sandbox: " + dir.lexically_relative(kStaging).string() +
                                " passes through a symlink of the jail's root (" +
                                current.lexically_relative(kStaging).string() + ")");
      }
      if (!S_ISDIR(st.st_mode)) return root_error("mkdir", ENOTDIR, current.string());
      continue;
    }
    if (::mkdir(current.c_str(), 0711) != 0 && errno != EEXIST) {
      return root_error("mkdir", errno, current.string());
    }
  }
  return Status::ok();
}

Status write_small_file(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return root_error("create", errno, path);
  const bool ok =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  const int err = errno;
  ::close(fd);
  return ok ? Status::ok() : root_error("write", err, path);
}

Status make_mount_point(const std::string& target, bool is_dir) {
  if (is_dir) return make_dirs_in_root(target);
  KF_RETURN_IF_ERROR(make_dirs_in_root(fs::path(target).parent_path()));
  struct stat st {};
  if (::lstat(target.c_str(), &st) == 0) {
    if (S_ISREG(st.st_mode)) return Status::ok();
    return root_error("create mount point", EEXIST, target);
  }
  int fd = ::open(target.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return root_error("create mount point", errno, target);
  ::close(fd);
  return Status::ok();
}

// Read-only (and nosuid, nodev), the whole tree below `target` where the kernel can.
Status make_read_only(const std::string& target, bool recursive) {
  MountAttr attr;
  attr.attr_set = kAttrReadOnly | kAttrNoSuid | kAttrNoDev;
  if (recursive &&
      ::syscall(kMountSetattr, AT_FDCWD, target.c_str(), kAtRecursive, &attr, sizeof(attr)) == 0) {
    return Status::ok();
  }
  const unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV;
  if (::mount(nullptr, target.c_str(), nullptr, flags, nullptr) != 0) {
    return root_error("remount read-only", errno, target);
  }
  return Status::ok();
}

Status bind_mount(const Op& op, const std::string& target) {
  KF_RETURN_IF_ERROR(make_mount_point(target, op.source->is_dir()));
  const bool recursive = op.kind != Op::Kind::kSys && op.kind != Op::Kind::kDevice;
  const unsigned long flags = MS_BIND | (recursive ? MS_REC : 0);
  if (::mount(op.source->fd_path().c_str(), target.c_str(), nullptr, flags, nullptr) != 0) {
    return root_error("bind mount", errno, op.source->path() + " -> " + op.target);
  }
  if (op.kind == Op::Kind::kReadOnly || op.kind == Op::Kind::kSys ||
      (op.kind == Op::Kind::kBind && !op.writable)) {
    return make_read_only(target, recursive);
  }
  // Device nodes keep working (no nodev); writable binds lose setuid and device files.
  unsigned long remount = MS_BIND | MS_REMOUNT | MS_NOSUID;
  remount |= op.kind == Op::Kind::kDevice ? MS_NOEXEC : MS_NODEV;
  if (::mount(nullptr, target.c_str(), nullptr, remount, nullptr) != 0) {
    return root_error("remount bind", errno, op.target);
  }
  return Status::ok();
}

Status apply_op(const Op& op, const std::string& target) {
  switch (op.kind) {
    case Op::Kind::kReadOnly:
    case Op::Kind::kSys:
    case Op::Kind::kDevice:
    case Op::Kind::kBind:
      return bind_mount(op, target);
    case Op::Kind::kHide:
      if (struct stat st{}; ::lstat(target.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return Status::ok();  // not in the root: nothing to hide
      }
      [[fallthrough]];
    case Op::Kind::kTmpfs:
      KF_RETURN_IF_ERROR(make_dirs_in_root(target));
      if (::mount("tmpfs", target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, op.text.c_str()) != 0) {
        return root_error("mount tmpfs", errno, op.target);
      }
      return Status::ok();
    case Op::Kind::kFile:
      KF_RETURN_IF_ERROR(make_dirs_in_root(fs::path(target).parent_path()));
      return write_small_file(target, op.text);
    case Op::Kind::kLink:
      KF_RETURN_IF_ERROR(make_dirs_in_root(fs::path(target).parent_path()));
      if (::symlink(op.text.c_str(), target.c_str()) != 0 && errno != EEXIST) {
        return root_error("symlink", errno, op.target + " -> " + op.text);
      }
      return Status::ok();
    case Op::Kind::kProc:
      KF_RETURN_IF_ERROR(make_dirs_in_root(target));
      if (::mount("proc", target.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") !=
          0) {
        return root_error("mount /proc", errno, op.target);
      }
      return Status::ok();
  }
  return Status::ok();
}

Status enter_root(const std::string& staging) {
  if (::chdir(staging.c_str()) != 0) return root_error("chdir", errno, staging);
  // pivot_root(".", "."): the old root is stacked on the new one, then detached.
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return root_error("pivot_root", errno, staging);
  if (::umount2(".", MNT_DETACH) != 0) return root_error("detach the old root", errno, "/");
  if (::chdir("/") != 0) return root_error("chdir", errno, "/");
  const unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV;
  if (::mount(nullptr, "/", nullptr, flags, nullptr) != 0) {
    return root_error("remount the root read-only", errno, "/");
  }
  return Status::ok();
}

}  // namespace

Status build_root(const JailSpec& spec, Json& report) {
  ::umask(022);  // directories and files made below are what their mode says
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return root_error("make mounts private", errno, "/");
  }
  KF_ASSIGN_OR_RETURN(std::vector<Op> ops, plan(spec, report));
  const std::string staging = kStaging;
  if (::mount("tmpfs", staging.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
              "mode=0755,size=4194304,nr_inodes=16384") != 0) {
    return root_error("mount the root's tmpfs", errno, staging);
  }
  std::set<std::string> listable;  // directories holding files, links or devices
  for (const Op& op : ops) {
    KF_RETURN_IF_ERROR(apply_op(op, staging + op.target));
    if (op.kind == Op::Kind::kFile || op.kind == Op::Kind::kLink || op.kind == Op::Kind::kDevice) {
      listable.insert(fs::path(op.target).parent_path().string());
    }
  }
  for (const auto& dir : spec.listable) {
    struct stat st {};
    if (!dir.empty() && dir.front() == '/' && ::lstat((staging + dir).c_str(), &st) == 0 &&
        S_ISDIR(st.st_mode)) {
      listable.insert(dir);
    }
  }
  for (const auto& dir : listable) {
    (void)::chmod((staging + dir).c_str(), 0755);  // may be a read-only bind: then it is as is
  }
  report["mounts"] = ops.size();
  return enter_root(staging);
}

}  // namespace kforge::sandbox
