#include "kforge/sandbox/seccomp_policy.h"

#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iterator>
#include <memory>

#include "kforge/common/errno_message.h"

namespace kforge::sandbox {
namespace {

// Denied with EPERM: no kernel needs them (docs/security.md "Process isolation").
constexpr const char* kDenied[] = {
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "bpf",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "lookup_dcookie",
    "quotactl",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
    "iopl",
    "ioperm",
    "uselib",
    "ustat",
    "sysfs",
    "vhangup",
    "sethostname",
    "setdomainname",
    "nfsservctl",
    "vm86",
    "vm86old",
};

// Socket families (the `domain` of socket(2)) by number, as <sys/socket.h> names them. A job
// keeps AF_UNIX (its link to the judge, tools' local sockets), AF_INET/AF_INET6 (loopback
// only: its network namespace has nothing else) and AF_NETLINK with NETLINK_ROUTE (glibc's
// getaddrinfo, if_nameindex and getifaddrs); every other family answers EAFNOSUPPORT, as on
// a kernel built without it, so libraries fall back instead of failing.
constexpr const char* kFamilyNames[] = {
    "AF_UNSPEC",     "AF_UNIX",      "AF_INET",     "AF_AX25",  "AF_IPX",     "AF_APPLETALK",
    "AF_NETROM",     "AF_BRIDGE",    "AF_ATMPVC",   "AF_X25",   "AF_INET6",   "AF_ROSE",
    "AF_DECnet",     "AF_NETBEUI",   "AF_SECURITY", "AF_KEY",   "AF_NETLINK", "AF_PACKET",
    "AF_ASH",        "AF_ECONET",    "AF_ATMSVC",   "AF_RDS",   "AF_SNA",     "AF_IRDA",
    "AF_PPPOX",      "AF_WANPIPE",   "AF_LLC",      "AF_IB",    "AF_MPLS",    "AF_CAN",
    "AF_TIPC",       "AF_BLUETOOTH", "AF_IUCV",     "AF_RXRPC", "AF_ISDN",    "AF_PHONET",
    "AF_IEEE802154", "AF_CAIF",      "AF_ALG",      "AF_NFC",   "AF_VSOCK",   "AF_KCM",
    "AF_QIPCRTR",    "AF_SMC",       "AF_XDP",      "AF_MCTP"};
constexpr uint64_t kAfUnix = 1;
constexpr uint64_t kAfNetlink = 16;
constexpr uint64_t kAllowedFamilies[] = {kAfUnix, 2 /* AF_INET */, 10 /* AF_INET6 */, kAfNetlink};
// Families at or above this number are refused wholesale (the kernel knows 46 today); each
// below it that is not allowed has a rule of its own. The comparisons are on all 64 bits of
// the argument, so a family with high bits set (the kernel reads an int) is refused too.
constexpr uint64_t kFamilyRuleLimit = 64;

bool allowed_family(uint64_t family) {
  for (uint64_t f : kAllowedFamilies) {
    if (f == family) return true;
  }
  return false;
}

constexpr uint64_t kNamespaceFlags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |
                                     CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | 0x00000080ULL;
// 0x80 is CLONE_NEWTIME.

struct CtxDeleter {
  void operator()(scmp_filter_ctx ctx) const { seccomp_release(ctx); }
};

Status seccomp_error(const char* what, int rc) {
  // libseccomp returns -errno.
  return internal_error(std::string("seccomp: ") + what + ": " + errno_message(-rc));
}

// socket(2) and socketpair(2) for the families a job may use (kFamilyNames' comment).
Status add_socket_rules(scmp_filter_ctx ctx) {
  const auto refuse = [&](int nr, int err, scmp_arg_cmp cmp) -> Status {
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(static_cast<uint32_t>(err)), nr, 1, cmp);
    if (rc != 0 && rc != -EEXIST) return seccomp_error("socket families", rc);
    return Status::ok();
  };
  for (uint64_t f = 0; f < kFamilyRuleLimit; ++f) {
    if (allowed_family(f)) continue;
    KF_RETURN_IF_ERROR(refuse(SCMP_SYS(socket), EAFNOSUPPORT,
                              {.arg = 0, .op = SCMP_CMP_EQ, .datum_a = f, .datum_b = 0}));
  }
  KF_RETURN_IF_ERROR(
      refuse(SCMP_SYS(socket), EAFNOSUPPORT,
             {.arg = 0, .op = SCMP_CMP_GE, .datum_a = kFamilyRuleLimit, .datum_b = 0}));
  // AF_NETLINK: NETLINK_ROUTE (protocol 0) only.
  const scmp_arg_cmp netlink{.arg = 0, .op = SCMP_CMP_EQ, .datum_a = kAfNetlink, .datum_b = 0};
  const scmp_arg_cmp not_route{.arg = 2, .op = SCMP_CMP_NE, .datum_a = 0, .datum_b = 0};
  int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2, netlink,
                            not_route);
  if (rc != 0 && rc != -EEXIST) return seccomp_error("netlink protocols", rc);
  // socketpair(2) exists only for AF_UNIX.
  return refuse(SCMP_SYS(socketpair), EAFNOSUPPORT,
                {.arg = 0, .op = SCMP_CMP_NE, .datum_a = kAfUnix, .datum_b = 0});
}

}  // namespace

std::vector<std::string> refused_socket_families() {
  std::vector<std::string> out;
  for (uint64_t f = 0; f < std::size(kFamilyNames); ++f) {
    if (!allowed_family(f)) out.emplace_back(kFamilyNames[f]);
  }
  return out;
}

std::vector<std::string> denied_syscalls(const SeccompOptions& options) {
  std::vector<std::string> out;
  for (const char* name : kDenied) {
    out.emplace_back(name);
  }
  if (!options.allow_perf_events) out.emplace_back("perf_event_open");
  return out;
}

StatusOr<std::string> build_seccomp_bpf(const SeccompOptions& options) {
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return internal_error("seccomp_init failed");
  // Foreign architectures (i386 through int 0x80, x32) are not the native one: kill.
  int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc != 0) return seccomp_error("bad-arch action", rc);
  for (const auto& name : denied_syscalls(options)) {
    int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) continue;  // not a system call on this architecture
    rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (rc != 0 && rc != -EEXIST) return seccomp_error(name.c_str(), rc);
  }
  rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc != 0) return seccomp_error("clone3", rc);
  // One rule per namespace flag: clone with any of them set is refused.
  for (uint64_t bit = 1; bit != 0 && bit <= kNamespaceFlags; bit <<= 1) {
    if ((kNamespaceFlags & bit) == 0) continue;
    // The SCMP_A0 macro is a C compound literal; the struct is spelled out for C++.
    const scmp_arg_cmp flag{.arg = 0, .op = SCMP_CMP_MASKED_EQ, .datum_a = bit, .datum_b = bit};
    rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, flag);
    if (rc != 0 && rc != -EEXIST) return seccomp_error("clone flags", rc);
  }
  KF_RETURN_IF_ERROR(add_socket_rules(ctx.get()));
  // libseccomp writes the program to a descriptor: an anonymous file, read back.
  int fd = ::memfd_create("kforge-seccomp", MFD_CLOEXEC);
  if (fd < 0) return errno_error("memfd_create", errno);
  rc = seccomp_export_bpf(ctx.get(), fd);
  std::string bpf;
  if (rc == 0 && ::lseek(fd, 0, SEEK_SET) == 0) {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) {
      bpf.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  if (rc != 0) return seccomp_error("export", rc);
  if (bpf.empty() || bpf.size() % 8 != 0) return internal_error("seccomp: bad exported program");
  return bpf;
}

}  // namespace kforge::sandbox
