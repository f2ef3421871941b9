// Puts the calling process in a jail: its own mount, network, IPC and UTS namespaces, a
// file-system view that hides the server's data directory and every other job, an
// unprivileged identity with no capabilities, resource limits, no_new_privs and a seccomp
// filter (docs/security.md "Process isolation").
//
// enter_jail() runs in the process being jailed, after fork and before any untrusted code:
// the Python worker calls it through libkforge_sandbox.so (abi/kforge_sandbox.h), the native
// CUDA worker directly. The caller must be single-threaded (unshare(CLONE_NEWNS) refuses a
// process whose threads share its file-system attributes) and privileged (root in the
// initial user namespace, or CAP_SYS_ADMIN + CAP_SETUID/SETGID) for the steps it asks for.
//
// Steps, in this order (each is only legal at that point): unshare namespaces → mounts
// (private propagation, hidden directories, re-exposed paths, binds, masked files, private
// /tmp and /dev/shm, a new /proc with hidepid) → hostname, loopback up → chdir → drop the
// capability bounding set → groups, gid, uid → parent-death signal, dumpable → rlimits →
// umask → no_new_privs → seccomp. The first failing step is returned with its name.
//
// Example:
//   KF_ASSIGN_OR_RETURN(JailSpec spec, JailSpec::from_json(message["jail"]));
//   KF_ASSIGN_OR_RETURN(Json report, enter_jail(spec));
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::sandbox {

struct BindMount {
  std::string source;  // must exist; opened before anything is hidden
  std::string target;  // created (as a directory or file) when missing
  bool writable = false;
};

struct JailSpec {
  std::string role;  // "judge", "candidate", "native": for reports and errors only

  // Namespaces to unshare here (a pid namespace is made by the parent, with clone).
  bool new_mount_ns = true;
  bool new_net_ns = true;
  bool new_ipc_ns = true;
  bool new_uts_ns = true;

  // Directories replaced by an empty tmpfs (the data directory): nothing below them stays
  // visible except what `binds` and `expose` put back.
  std::vector<std::string> hide;
  // Paths that must stay readable for the new uid (the Python installation, the worker's
  // package): where an ancestor directory would block the uid (no search permission for
  // others, e.g. /root), that ancestor is replaced by a tmpfs holding read-only binds of
  // exactly these paths.
  std::vector<std::string> expose;
  std::vector<BindMount> binds;
  std::vector<std::string> mask;   // files covered by /dev/null (other GPUs' device nodes)
  std::vector<std::string> tmpfs;  // private, world-writable tmpfs (/tmp, /dev/shm)
  bool mount_proc = true;          // a new /proc, hidepid=2
  std::string hostname = "kforge-job";
  bool loopback_up = true;
  std::string chdir;

  // Identity. Ignored (and nothing is dropped) when uid is unset.
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  std::vector<gid_t> groups;

  std::map<std::string, uint64_t> rlimits;  // core, nofile, fsize, nproc, as, cpu, stack
  uint32_t umask = 077;
  bool no_new_privs = true;
  std::string seccomp_bpf;  // raw struct sock_filter array; empty = no filter

  // Parses the `jail` object of the worker protocol's `sandbox` message; errors name the field.
  static StatusOr<JailSpec> from_json(const Json& j);
  Json to_json() const;
};

// Applies `spec` to the calling process. On success returns a report of what was applied:
// {"role", "uid", "gid", "namespaces": [...], "mounts": N, "capabilities": "none",
//  "no_new_privs": true, "seccomp": true, "rlimits": {...}}.
StatusOr<Json> enter_jail(const JailSpec& spec);

// clone(2) with namespace flags, like fork(): returns the child's pid in the parent and 0 in
// the child, which is pid 1 of a new pid namespace when `new_pid_ns` (and its own mount,
// net, ipc, uts namespaces as asked). -1 with errno on failure. The caller must handle the
// fork hooks of its runtime (Python: PyOS_BeforeFork/AfterFork_*).
pid_t clone_into_namespaces(bool new_pid_ns, bool new_mount_ns, bool new_net_ns);

// Whether this process may build a full jail (root in the initial user namespace with
// CAP_SYS_ADMIN, CAP_SETUID and CAP_SETGID); `why` says what is missing.
bool can_jail(std::string* why);

}  // namespace kforge::sandbox
