// What a jail is made of (sandbox/jail.h enters it): namespaces, the minimal root file system,
// an identity, resource limits and a seccomp filter. It travels as the `jail` object of the
// worker protocol's `sandbox` message (docs/worker-protocol.md), built by the supervisor
// (workers/sandbox_policy.h) and parsed by the process being jailed.
//
// The root (docs/security.md "The jail's file system") is a fresh tmpfs made `/`, read-only
// once built, holding only what the spec names: host paths bound read-only at the same path
// (the system's programs and libraries, the Python installation, the worker package, the CUDA
// driver and toolkit), device nodes, small synthesized files, symlinks, private size-limited
// tmpfs (the only writable places, with the binds marked writable), a new /proc and the host's
// /sys without what is mounted below it. Nothing else of the host is there.
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
  std::string source;  // must exist; opened before the root is built
  std::string target;  // created (as a directory or file) when missing
  bool writable = false;
};

// A private tmpfs: its pages are charged to the memory cgroup of the process that writes
// them, and it is gone when the last process of the jail's mount namespace is.
struct TmpfsMount {
  std::string path;
  uint64_t size_bytes = 0;  // required: the most it may hold
  uint32_t mode = 01777;
  std::optional<uid_t> uid;  // owner of its top directory (default root)
  std::optional<gid_t> gid;
};

struct JailSpec {
  std::string role;  // "judge", "candidate", "native": for reports and errors only

  // Namespaces to unshare here (a pid namespace is made by the parent, with clone). Without a
  // mount namespace the file-system fields below are ignored.
  bool new_mount_ns = true;
  bool new_net_ns = true;
  bool new_ipc_ns = true;
  bool new_uts_ns = true;

  // The root. Host paths bound read-only at the same path; a symlink met on the way to one
  // (/lib -> usr/lib, a venv's bin/python) is made again in the root, and its target bound.
  // Paths missing on this host are skipped.
  std::vector<std::string> read_only;
  // Directories made on the way to a read_only path are searchable, not listable (0711);
  // these are listable (0755), for a sys.path entry above a bound package.
  std::vector<std::string> listable;
  // Device nodes (or a directory of them) bound at the same path, usable (not nodev).
  std::vector<std::string> devices;
  std::vector<BindMount> binds;
  std::vector<TmpfsMount> tmpfs;             // the writable places: /tmp, /dev/shm, scratch
  std::map<std::string, std::string> files;  // path -> content (read-only in the root)
  std::map<std::string, std::string> links;  // path -> symlink target (/dev/fd -> ...)
  // Never visible, even where a read_only path contains one (it is covered by an empty
  // tmpfs) or names one (skipped): the data directory, /sys/fs/cgroup. `binds` and `tmpfs`
  // below one are still made (the process's own scratch directory).
  std::vector<std::string> hide;
  bool mount_proc = true;  // a new /proc, hidepid=2
  bool bind_sys = true;    // the host's /sys read-only, without the file systems below it
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

// The rlimit resource of a JailSpec::rlimits key; kInvalidArgument for an unknown one.
StatusOr<int> rlimit_resource(const std::string& name);

}  // namespace kforge::sandbox
