// Puts the calling process in a jail (jail_spec.h): its own mount, network, IPC and UTS
// namespaces, a minimal root file system (root_fs.h: no host file but the programs,
// libraries and devices a job needs; the data directory and every other job out of sight),
// an unprivileged identity with no capabilities, resource limits, no_new_privs and a seccomp
// filter (docs/security.md "Process isolation").
//
// enter_jail() runs in the process being jailed, after fork and before any untrusted code:
// the Python worker calls it through libkforge_sandbox.so (abi/kforge_sandbox.h), the native
// CUDA worker directly. The caller must be single-threaded (unshare(CLONE_NEWNS) refuses a
// process whose threads share its file-system attributes) and privileged (root in the
// initial user namespace, or CAP_SYS_ADMIN + CAP_SETUID/SETGID) for the steps it asks for.
//
// Steps, in this order (each is only legal at that point): unshare namespaces → the root
// (built on a tmpfs, pivot_root, remounted read-only) → hostname, loopback up → chdir → drop the
// capability bounding set → groups, gid, uid → parent-death signal, dumpable → rlimits →
// umask → no_new_privs → seccomp. The first failing step is returned with its name.
//
// Example:
//   KF_ASSIGN_OR_RETURN(JailSpec spec, JailSpec::from_json(message["jail"]));
//   KF_ASSIGN_OR_RETURN(Json report, enter_jail(spec));
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/sandbox/jail_spec.h"

namespace kforge::sandbox {

// Applies `spec` to the calling process. On success returns a report of what was applied:
// {"role", "uid", "gid", "namespaces": [...], "mounts": N, "missing": [...], "hidden": [...],
//  "capabilities": "none", "no_new_privs": true, "seccomp": true, "rlimits": {...}}.
StatusOr<Json> enter_jail(const JailSpec& spec);

// clone(2) with namespace flags, like fork(): returns the child's pid in the parent and 0 in
// the child, which is pid 1 of a new pid namespace when `new_pid_ns` (and its own mount,
// net, ipc, uts namespaces as asked). -1 with errno on failure. The caller must handle the
// fork hooks of its runtime (Python: PyOS_BeforeFork/AfterFork_*).
pid_t clone_into_namespaces(bool new_pid_ns, bool new_mount_ns, bool new_net_ns);

// Whether this process may build a full jail and run jobs in it (CAP_SYS_ADMIN, CAP_NET_ADMIN,
// CAP_SETUID, CAP_SETGID, CAP_SETPCAP, CAP_CHOWN, CAP_FOWNER, CAP_DAC_OVERRIDE and CAP_KILL
// in its effective set: docs/deployment.md "The container's privileges"); `why` says what is
// missing.
bool can_jail(std::string* why);

}  // namespace kforge::sandbox
