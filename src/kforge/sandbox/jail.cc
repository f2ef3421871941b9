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

#include "kforge/common/errno_message.h"
#include "kforge/sandbox/root_fs.h"

namespace kforge::sandbox {
namespace {

namespace fs = std::filesystem;

Status step_error(std::string_view step, int err, std::string_view detail = {}) {
  std::string what(step);
  if (!detail.empty()) {
    what += " (";
    what += detail;
    what += ")";
  }
  return errno_error("sandbox: " + what, err);
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

}  // namespace

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

  if (spec.new_mount_ns) KF_RETURN_IF_ERROR(build_root(spec, report));
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
  // Bringing up the loopback interface of the job's own network namespace (a container
  // without it started, then lost every warm process: "bring lo up: Operation not permitted").
  if (!has(CAP_NET_ADMIN)) missing.emplace_back("CAP_NET_ADMIN");
  if (!has(CAP_SETUID)) missing.emplace_back("CAP_SETUID");
  if (!has(CAP_SETGID)) missing.emplace_back("CAP_SETGID");
  if (!has(CAP_SETPCAP)) missing.emplace_back("CAP_SETPCAP");
  // The jobs' scratch directories and caches, owned by their users; the cgroup tree; ending
  // a job's processes (other users') where its cgroup cannot.
  if (!has(CAP_CHOWN)) missing.emplace_back("CAP_CHOWN");
  if (!has(CAP_FOWNER)) missing.emplace_back("CAP_FOWNER");
  if (!has(CAP_DAC_OVERRIDE)) missing.emplace_back("CAP_DAC_OVERRIDE");
  if (!has(CAP_KILL)) missing.emplace_back("CAP_KILL");
  if (missing.empty()) return true;
  if (why != nullptr) {
    std::string text = "missing capabilities:";
    for (const auto& m : missing)
      text += " " + m;
    text += " (run kforge as root; in a container, grant them: docs/deployment.md)";
    *why = text;
  }
  return false;
}

}  // namespace kforge::sandbox
