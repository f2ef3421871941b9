#include "kforge/sandbox/jail.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kforge/common/base64.h"
#include "kforge/common/errno_message.h"

namespace kforge::sandbox {
namespace {

namespace fs = std::filesystem;

// The fd-backed source of a mount, opened before anything is hidden so that a path under a
// hidden directory can still be bound back.
struct OpenedSource {
  int fd = -1;
  bool is_dir = false;
  std::string path;
  ~OpenedSource() {
    if (fd >= 0) ::close(fd);
  }
  OpenedSource() = default;
  OpenedSource(const OpenedSource&) = delete;
  OpenedSource& operator=(const OpenedSource&) = delete;
  OpenedSource(OpenedSource&& o) noexcept : fd(o.fd), is_dir(o.is_dir), path(std::move(o.path)) {
    o.fd = -1;
  }
  OpenedSource& operator=(OpenedSource&& o) noexcept {
    if (this != &o) {
      if (fd >= 0) ::close(fd);
      fd = o.fd;
      is_dir = o.is_dir;
      path = std::move(o.path);
      o.fd = -1;
    }
    return *this;
  }
  std::string fd_path() const { return "/proc/self/fd/" + std::to_string(fd); }
};

Status step_error(std::string_view step, int err, std::string_view detail = {}) {
  std::string what(step);
  if (!detail.empty()) {
    what += " (";
    what += detail;
    what += ")";
  }
  return errno_error("sandbox: " + what, err);
}

StatusOr<OpenedSource> open_source(const std::string& path) {
  OpenedSource s;
  s.path = path;
  s.fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (s.fd < 0) return step_error("open", errno, path);
  struct stat st {};
  if (::fstat(s.fd, &st) != 0) return step_error("stat", errno, path);
  s.is_dir = S_ISDIR(st.st_mode);
  return s;
}

// mkdir -p that works inside a fresh tmpfs (mode 0755 for created directories).
Status make_dir_chain(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec && !fs::is_directory(path)) return step_error("mkdir", ec.value(), path);
  return Status::ok();
}

Status make_mount_point(const std::string& target, bool is_dir) {
  if (is_dir) return make_dir_chain(target);
  KF_RETURN_IF_ERROR(make_dir_chain(fs::path(target).parent_path().string()));
  if (::access(target.c_str(), F_OK) == 0) return Status::ok();
  int fd = ::open(target.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return step_error("create mount point", errno, target);
  ::close(fd);
  return Status::ok();
}

Status bind(const OpenedSource& src, const std::string& target, bool writable) {
  KF_RETURN_IF_ERROR(make_mount_point(target, src.is_dir));
  std::string from = src.fd_path();
  if (::mount(from.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return step_error("bind mount", errno, src.path + " -> " + target);
  }
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV;
  if (!writable) flags |= MS_RDONLY;
  if (::mount(nullptr, target.c_str(), nullptr, flags, nullptr) != 0) {
    return step_error("remount bind", errno, target);
  }
  return Status::ok();
}

Status mount_tmpfs(const std::string& target, const char* options) {
  KF_RETURN_IF_ERROR(make_dir_chain(target));
  if (::mount("tmpfs", target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) {
    return step_error("mount tmpfs", errno, target);
  }
  return Status::ok();
}

bool is_under(const std::string& path, const std::string& dir) {
  if (path == dir) return true;
  std::string prefix = dir;
  if (prefix.empty() || prefix.back() != '/') prefix += '/';
  return path.starts_with(prefix);
}

Status set_loopback_up() {
  int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return step_error("socket for lo", errno);
  ifreq req{};
  std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
  int rc = ::ioctl(sock, SIOCGIFFLAGS, &req);
  if (rc == 0) {
    req.ifr_flags = static_cast<short>(req.ifr_flags | IFF_UP | IFF_RUNNING);
    rc = ::ioctl(sock, SIOCSIFFLAGS, &req);
  }
  int err = errno;
  ::close(sock);
  if (rc != 0) return step_error("bring lo up", err);
  return Status::ok();
}

int last_capability() {
  std::ifstream f("/proc/sys/kernel/cap_last_cap");
  int last = CAP_LAST_CAP;
  if (f >> last) return last;
  return CAP_LAST_CAP;
}

Status drop_bounding_set() {
  const int last = last_capability();
  for (int cap = 0; cap <= last; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      return step_error("drop bounding capability", errno, std::to_string(cap));
    }
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  return Status::ok();
}

Status check_no_capabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return step_error("capget", errno);
  for (const auto& d : data) {
    if (d.effective != 0 || d.permitted != 0 || d.inheritable != 0) {
      return internal_error("sandbox: capabilities remain after the uid change");
    }
  }
  return Status::ok();
}

Status clear_capabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capset, &header, data) != 0) return step_error("capset", errno);
  return Status::ok();
}

StatusOr<int> rlimit_resource(const std::string& name) {
  static const std::map<std::string, int> kNames = {
      {"core", RLIMIT_CORE},   {"nofile", RLIMIT_NOFILE},  {"fsize", RLIMIT_FSIZE},
      {"nproc", RLIMIT_NPROC}, {"as", RLIMIT_AS},          {"cpu", RLIMIT_CPU},
      {"stack", RLIMIT_STACK}, {"memlock", RLIMIT_MEMLOCK}};
  auto it = kNames.find(name);
  if (it == kNames.end()) return invalid_argument("unknown rlimit '" + name + "'", "rlimits");
  return it->second;
}

Status apply_rlimits(const std::map<std::string, uint64_t>& limits, Json& report) {
  for (const auto& [name, value] : limits) {
    KF_ASSIGN_OR_RETURN(int resource, rlimit_resource(name));
    rlimit current{};
    ::getrlimit(resource, &current);
    rlim_t v = static_cast<rlim_t>(value);
    if (current.rlim_max != RLIM_INFINITY) v = std::min(v, current.rlim_max);
    rlimit wanted{v, v};
    if (::setrlimit(resource, &wanted) != 0) return step_error("setrlimit", errno, name);
    report[name] = static_cast<uint64_t>(v);
  }
  return Status::ok();
}

Status install_seccomp(const std::string& bpf) {
  if (bpf.size() % sizeof(sock_filter) != 0 || bpf.empty()) {
    return invalid_argument("seccomp program size is not a multiple of 8 bytes", "seccomp_bpf");
  }
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(bpf.size() / sizeof(sock_filter));
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): the kernel only reads it
  prog.filter = reinterpret_cast<sock_filter*>(const_cast<char*>(bpf.data()));
  long rc = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW, &prog);
  if (rc != 0 && errno == EINVAL) {
    rc = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
  }
  if (rc != 0) return step_error("install seccomp filter", errno);
  return Status::ok();
}

StatusOr<std::vector<std::string>> string_list(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || j[key].is_null()) return out;
  if (!j[key].is_array()) return invalid_argument("must be an array of strings", key);
  for (size_t i = 0; i < j[key].size(); ++i) {
    if (!j[key][i].is_string()) {
      return invalid_argument("must be a string", std::string(key) + "[" + std::to_string(i) + "]");
    }
    out.push_back(j[key][i].get<std::string>());
  }
  return out;
}

Status mount_all(const JailSpec& spec, Json& report) {
  int mounts = 0;
  // Mount points made below are searchable by the new uid whatever umask was inherited.
  ::umask(022);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return step_error("make / private", errno);
  }
  // Everything that must stay reachable is opened now, before anything is covered.
  std::vector<std::pair<OpenedSource, BindMount>> binds;
  for (const auto& b : spec.binds) {
    KF_ASSIGN_OR_RETURN(OpenedSource src, open_source(b.source));
    binds.emplace_back(std::move(src), b);
  }
  // Directories this jail covers with a fresh tmpfs: the private ones, the hidden ones, and
  // every ancestor that would block the new uid from an exposed path (e.g. /root).
  std::vector<std::string> covered;
  for (const auto& d : spec.tmpfs)
    covered.push_back(d);
  for (const auto& d : spec.hide)
    covered.push_back(d);
  std::vector<OpenedSource> exposed;
  std::vector<std::string> ancestors;
  for (const auto& p : spec.expose) {
    std::error_code ec;
    fs::path real = fs::weakly_canonical(p, ec);
    if (ec || !fs::exists(real)) continue;  // a missing path needs no view
    // Nothing below a hidden directory is ever re-exposed (the data directory stays hidden even
    // when a caller's import path names it).
    bool hidden = std::any_of(spec.hide.begin(), spec.hide.end(), [&](const std::string& h) {
      return is_under(real, h) || is_under(h, real);
    });
    if (hidden) continue;
    std::string anc = blocking_ancestor(real);
    bool under_cover = std::any_of(covered.begin(), covered.end(),
                                   [&](const std::string& c) { return is_under(real, c); });
    if (anc.empty() && !under_cover) continue;  // already readable, and stays visible
    if (!anc.empty() && std::find(ancestors.begin(), ancestors.end(), anc) == ancestors.end()) {
      ancestors.push_back(anc);
    }
    bool nested = std::any_of(exposed.begin(), exposed.end(),
                              [&](const OpenedSource& e) { return is_under(real, e.path); });
    if (nested) continue;
    std::erase_if(exposed, [&](const OpenedSource& e) { return is_under(e.path, real); });
    KF_ASSIGN_OR_RETURN(OpenedSource src, open_source(real.string()));
    exposed.push_back(std::move(src));
  }
  for (const auto& dir : spec.tmpfs) {
    KF_RETURN_IF_ERROR(mount_tmpfs(dir, "mode=1777"));
    ++mounts;
  }
  for (const auto& dir : spec.hide) {
    if (!fs::is_directory(dir)) continue;  // already covered (e.g. a data dir under /tmp)
    KF_RETURN_IF_ERROR(mount_tmpfs(dir, "mode=0755,size=16m,nr_inodes=4096"));
    ++mounts;
  }
  for (const auto& anc : ancestors) {
    if (!fs::is_directory(anc)) continue;
    KF_RETURN_IF_ERROR(mount_tmpfs(anc, "mode=0755,size=16m,nr_inodes=4096"));
    ++mounts;
  }
  for (const auto& src : exposed) {
    KF_RETURN_IF_ERROR(bind(src, src.path, /*writable=*/false));
    ++mounts;
  }
  for (const auto& [src, b] : binds) {
    KF_RETURN_IF_ERROR(bind(src, b.target, b.writable));
    ++mounts;
  }
  for (const auto& file : spec.mask) {
    if (::access(file.c_str(), F_OK) != 0) continue;
    if (::mount("/dev/null", file.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      return step_error("mask", errno, file);
    }
    ++mounts;
  }
  if (spec.mount_proc) {
    if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") != 0) {
      return step_error("mount /proc", errno);
    }
    ++mounts;
  }
  report["mounts"] = mounts;
  return Status::ok();
}

}  // namespace

// The topmost ancestor of `path` (itself excluded) that a uid other than its owner cannot
// search, or "" when every ancestor is searchable by others.
std::string blocking_ancestor(const fs::path& path) {
  fs::path current = "/";
  for (const auto& part : path.relative_path()) {
    if (current != "/") {
      struct stat st {};
      if (::stat(current.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) return current;
    }
    current /= part;
  }
  return {};
}

StatusOr<JailSpec> JailSpec::from_json(const Json& j) {
  if (!j.is_object()) return invalid_argument("must be an object", "jail");
  JailSpec s;
  s.role = j.value("role", "");
  s.new_mount_ns = j.value("new_mount_ns", true);
  s.new_net_ns = j.value("new_net_ns", true);
  s.new_ipc_ns = j.value("new_ipc_ns", true);
  s.new_uts_ns = j.value("new_uts_ns", true);
  KF_ASSIGN_OR_RETURN(s.hide, string_list(j, "hide"));
  KF_ASSIGN_OR_RETURN(s.expose, string_list(j, "expose"));
  KF_ASSIGN_OR_RETURN(s.mask, string_list(j, "mask"));
  KF_ASSIGN_OR_RETURN(s.tmpfs, string_list(j, "tmpfs"));
  if (j.contains("binds") && j["binds"].is_array()) {
    for (const auto& b : j["binds"]) {
      if (!b.is_object() || !b.contains("source") || !b.contains("target") ||
          !b["source"].is_string() || !b["target"].is_string()) {
        return invalid_argument("each bind needs string 'source' and 'target'", "binds");
      }
      s.binds.push_back({b["source"].get<std::string>(), b["target"].get<std::string>(),
                         b.value("writable", false)});
    }
  }
  s.mount_proc = j.value("mount_proc", true);
  s.hostname = j.value("hostname", "kforge-job");
  s.loopback_up = j.value("loopback_up", true);
  s.chdir = j.value("chdir", "");
  if (j.contains("uid") && j["uid"].is_number_unsigned()) s.uid = j["uid"].get<uid_t>();
  if (j.contains("gid") && j["gid"].is_number_unsigned()) s.gid = j["gid"].get<gid_t>();
  if (j.contains("groups") && j["groups"].is_array()) {
    for (const auto& g : j["groups"]) {
      if (!g.is_number_unsigned()) return invalid_argument("must be unsigned integers", "groups");
      s.groups.push_back(g.get<gid_t>());
    }
  }
  if (s.uid && *s.uid == 0) return invalid_argument("a jail never runs as uid 0", "uid");
  if (j.contains("rlimits") && j["rlimits"].is_object()) {
    for (const auto& [k, v] : j["rlimits"].items()) {
      if (!v.is_number_unsigned()) return invalid_argument("must be unsigned", "rlimits." + k);
      KF_ASSIGN_OR_RETURN(int ignored, rlimit_resource(k));
      (void)ignored;
      s.rlimits[k] = v.get<uint64_t>();
    }
  }
  s.umask = j.value("umask", 077U);
  s.no_new_privs = j.value("no_new_privs", true);
  if (j.contains("seccomp_bpf_b64") && j["seccomp_bpf_b64"].is_string()) {
    auto decoded = base64_decode(j["seccomp_bpf_b64"].get<std::string>());
    if (!decoded.is_ok()) return invalid_argument(decoded.status().message(), "seccomp_bpf_b64");
    s.seccomp_bpf = std::move(decoded).value();
  }
  return s;
}

Json JailSpec::to_json() const {
  Json binds_json = Json::array();
  for (const auto& b : binds) {
    binds_json.push_back({{"source", b.source}, {"target", b.target}, {"writable", b.writable}});
  }
  Json j = {{"role", role},
            {"new_mount_ns", new_mount_ns},
            {"new_net_ns", new_net_ns},
            {"new_ipc_ns", new_ipc_ns},
            {"new_uts_ns", new_uts_ns},
            {"hide", hide},
            {"expose", expose},
            {"binds", binds_json},
            {"mask", mask},
            {"tmpfs", tmpfs},
            {"mount_proc", mount_proc},
            {"hostname", hostname},
            {"loopback_up", loopback_up},
            {"chdir", chdir},
            {"groups", groups},
            {"rlimits", rlimits},
            {"umask", umask},
            {"no_new_privs", no_new_privs}};
  if (uid) j["uid"] = *uid;
  if (gid) j["gid"] = *gid;
  if (!seccomp_bpf.empty()) j["seccomp_bpf_b64"] = base64_encode(seccomp_bpf);
  return j;
}

StatusOr<Json> enter_jail(const JailSpec& spec) {
  Json report = {{"role", spec.role}};
  Json namespaces = Json::array();
  int flags = 0;
  if (spec.new_mount_ns) flags |= CLONE_NEWNS, namespaces.push_back("mount");
  if (spec.new_net_ns) flags |= CLONE_NEWNET, namespaces.push_back("net");
  if (spec.new_ipc_ns) flags |= CLONE_NEWIPC, namespaces.push_back("ipc");
  if (spec.new_uts_ns) flags |= CLONE_NEWUTS, namespaces.push_back("uts");
  if (flags != 0 && ::unshare(flags) != 0) return step_error("unshare", errno);
  report["namespaces"] = namespaces;

  if (spec.new_mount_ns) KF_RETURN_IF_ERROR(mount_all(spec, report));
  if (spec.new_uts_ns && !spec.hostname.empty() &&
      ::sethostname(spec.hostname.data(), spec.hostname.size()) != 0) {
    return step_error("sethostname", errno);
  }
  if (spec.new_net_ns && spec.loopback_up) KF_RETURN_IF_ERROR(set_loopback_up());
  if (!spec.chdir.empty() && ::chdir(spec.chdir.c_str()) != 0) {
    return step_error("chdir", errno, spec.chdir);
  }

  if (spec.uid) {
    KF_RETURN_IF_ERROR(drop_bounding_set());
    gid_t gid = spec.gid.value_or(static_cast<gid_t>(*spec.uid));
    if (::setgroups(spec.groups.size(), spec.groups.data()) != 0) {
      return step_error("setgroups", errno);
    }
    if (::setresgid(gid, gid, gid) != 0) return step_error("setresgid", errno);
    if (::setresuid(*spec.uid, *spec.uid, *spec.uid) != 0) return step_error("setresuid", errno);
    KF_RETURN_IF_ERROR(clear_capabilities());
    KF_RETURN_IF_ERROR(check_no_capabilities());
    report["uid"] = *spec.uid;
    report["gid"] = gid;
    report["groups"] = spec.groups;
    report["capabilities"] = "none";
  }
  // A credential change clears the parent-death signal and makes the process non-dumpable;
  // CUDA writes /proc/self/task/*/comm, which needs it dumpable (its own uid owns the files).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);

  Json limits = Json::object();
  KF_RETURN_IF_ERROR(apply_rlimits(spec.rlimits, limits));
  report["rlimits"] = limits;
  ::umask(static_cast<mode_t>(spec.umask));
  if (spec.no_new_privs && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return step_error("no_new_privs", errno);
  }
  report["no_new_privs"] = spec.no_new_privs;
  if (!spec.seccomp_bpf.empty()) KF_RETURN_IF_ERROR(install_seccomp(spec.seccomp_bpf));
  report["seccomp"] = !spec.seccomp_bpf.empty();
  return report;
}

pid_t clone_into_namespaces(bool new_pid_ns, bool new_mount_ns, bool new_net_ns) {
  unsigned long flags = SIGCHLD;
  if (new_pid_ns) flags |= CLONE_NEWPID;
  if (new_mount_ns) flags |= CLONE_NEWNS;
  if (new_net_ns) flags |= CLONE_NEWNET;
  // A raw clone with a null stack behaves like fork(): the child continues on a copy.
  return static_cast<pid_t>(::syscall(SYS_clone, flags, nullptr, nullptr, nullptr, 0));
}

bool can_jail(std::string* why) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) {
    if (why != nullptr) *why = "capget failed: " + errno_message(errno);
    return false;
  }
  auto has = [&](int cap) { return (data[cap / 32].effective & (1U << (cap % 32))) != 0; };
  std::vector<std::string> missing;
  if (!has(CAP_SYS_ADMIN)) missing.emplace_back("CAP_SYS_ADMIN");
  if (!has(CAP_SETUID)) missing.emplace_back("CAP_SETUID");
  if (!has(CAP_SETGID)) missing.emplace_back("CAP_SETGID");
  if (!has(CAP_SETPCAP)) missing.emplace_back("CAP_SETPCAP");
  if (missing.empty()) return true;
  if (why != nullptr) {
    std::string text = "missing capabilities:";
    for (const auto& m : missing)
      text += " " + m;
    text += " (run kforge as root to jail jobs)";
    *why = text;
  }
  return false;
}

}  // namespace kforge::sandbox
