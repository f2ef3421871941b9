// What the supervisor prepares for every worker process before it runs anything: an
// identity (a uid of its own), a scratch directory only it can see, a cgroup holding every
// process it will start, and the jail it enters (sandbox/jail.h) — sent to the process as the
// worker protocol's `sandbox` message (docs/worker-protocol.md, docs/security.md).
//
// A Python child is two processes: the judge (the harness, the reference and the verdict)
// and the candidate (the only process that imports the candidate's code), each with its own
// uid, scratch directory and jail, in one cgroup. A native CUDA worker process is one.
//
// Modes: "required" fails the server's start where a full jail is impossible; "auto" (the
// default) jails where the server is privileged and otherwise runs jobs unjailed, saying so
// in /health and in every result's metadata.sandbox; "off" never jails.
//
// Thread-safety: one SandboxPolicy is shared by every worker; prepare_*() may be called from
// any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/sandbox/cgroup.h"
#include "kforge/workers/root_plan.h"

namespace kforge::workers {

struct SandboxOptions {
  std::string mode = "auto";  // auto | required | off
  std::filesystem::path data_dir;
  // Job identities: uids [uid_base, uid_base + uid_count) are handed out in turn (two per
  // Python child, one per native process); every one of them owns nothing else.
  uid_t uid_base = 61000;
  uint32_t uid_count = 20000;
  gid_t judge_gid = 60990;      // judges share their kernel caches through this group
  gid_t native_gid = 60991;     // so do native CUDA worker processes
  gid_t candidate_gid = 60992;  // and candidates, with --kernel-cache shared
  // Kernel caches (Triton, torch extensions, the cuda compile cache): "isolated" gives every
  // process its own, empty but for the zygote's read-only warm layer (nothing a job compiles
  // is ever loaded by another job); "shared" gives all judges one and all candidates another,
  // so a kernel compiled once is not compiled again (a candidate can then plant code that a
  // later candidate loads: for one-tenant servers only; docs/security.md).
  std::string kernel_cache = "isolated";
  // --cupy-cache-dir (the old server's CUPY_KERNEL_CACHE_DIR): with kernel_cache "shared",
  // candidates' CuPy cache lives here instead of in the candidates' shared cache; with
  // "isolated" it is unused (a cache shared between jobs would undo the isolation).
  std::filesystem::path cupy_cache_dir;
  int64_t memory_bytes = 0;  // per job (cgroup memory.max); 0 = default_job_memory_bytes()
  int64_t pids_max = 1024;   // per job (cgroup pids.max): processes and threads
  uint64_t file_size_bytes = uint64_t{8} << 30;  // RLIMIT_FSIZE
  uint64_t open_files = 4096;                    // RLIMIT_NOFILE
  // What of the host the jails show, read-only: planned at create() when jobs are jailed
  // (root_plan.h; it runs the workers' Python once to ask where it lives).
  RootPlanOptions root;
  // The size of each private tmpfs of a process (/tmp, /dev/shm, its scratch directory:
  // the only places it may write); 0 = a quarter of memory_bytes. Their pages count against
  // the job's memory as well.
  uint64_t tmp_bytes = 0;
  bool allow_perf_events = false;  // device metrics under Nsight Compute
};

// The resources of one worker process (Python child or native process). Destroying it
// kills whatever is left in its cgroup and removes its scratch directory.
struct ChildSandbox {
  std::unique_ptr<sandbox::JobCgroup> cgroup;  // null where cgroups are unavailable
  std::filesystem::path scratch;               // <data>/scratch/<name>
  std::filesystem::path judge_dir;             // scratch/judge (Python) or scratch (native)
  std::filesystem::path candidate_dir;         // scratch/candidate (Python only)
  std::filesystem::path judge_cache;           // the judge's kernel caches (Python only)
  std::filesystem::path candidate_cache;       // the candidate's
  Json message;                                // the `sandbox` message for the process
  int64_t memory_limit_bytes = 0;

  ChildSandbox() = default;
  ChildSandbox(const ChildSandbox&) = delete;
  ChildSandbox& operator=(const ChildSandbox&) = delete;
  ~ChildSandbox();
};

class SandboxPolicy {
 public:
  static StatusOr<std::shared_ptr<SandboxPolicy>> create(SandboxOptions options);
  ~SandboxPolicy();

  // True when jobs are jailed (identity, namespaces, seccomp); cgroups may still be missing.
  bool jailing() const { return jailing_; }
  bool has_cgroups() const { return cgroups_ != nullptr; }
  // For /health: {"mode", "jailing", "why_not", "cgroups": {...}, "uid_range", "seccomp",
  // "socket_families", "root": {...}, "memory_limit_bytes", "pids_max"}.
  Json describe() const;

  // Resources for a Python child on a device whose /dev/nvidia minor is `gpu_minor` (see
  // kUnknownGpuMinor). `pid` is attached to the cgroup.
  StatusOr<std::unique_ptr<ChildSandbox>> prepare_python_child(const std::string& name, pid_t pid,
                                                               int gpu_minor) const;
  // Resources for a native CUDA worker process; its jail is entered by the process itself.
  StatusOr<std::unique_ptr<ChildSandbox>> prepare_native_child(const std::string& name, pid_t pid,
                                                               int gpu_minor) const;

  // The environment a jailed Python child needs (cache directories); merged into the
  // zygote's environment.
  std::filesystem::path judge_cache_dir() const { return options_.data_dir / "cache" / "judge"; }
  // Batches' reference results (jobs/reference_reuse.h): the server's alone (0700); a judge
  // sees only its batch's file, staged into its own directory (reference_staging.h).
  std::filesystem::path reference_cache_dir() const {
    return options_.data_dir / "cache" / "reference";
  }
  std::filesystem::path candidate_cache_dir() const {
    return options_.data_dir / "cache" / "candidates";
  }
  std::filesystem::path native_cache_dir() const { return options_.data_dir / "cache"; }

 private:
  explicit SandboxPolicy(SandboxOptions options) : options_(std::move(options)) {}
  uid_t next_uid() const;
  // A jail of `role` whose process writes only to private tmpfs, its scratch directory
  // `scratch` among them (owned by uid:gid).
  Json base_jail(const std::string& role, int gpu_minor, const std::filesystem::path& scratch,
                 uid_t uid, gid_t gid) const;
  Json cache_env(const std::filesystem::path& home, const std::filesystem::path& cache) const;
  StatusOr<std::unique_ptr<ChildSandbox>> make_scratch(const std::string& name) const;
  Status attach(ChildSandbox& child, const std::string& name, pid_t pid) const;

  SandboxOptions options_;
  bool jailing_ = false;
  std::string why_not_;
  std::string seccomp_bpf_;
  std::unique_ptr<sandbox::CgroupTree> cgroups_;
  std::string cgroups_error_;
  int64_t memory_bytes_ = 0;
  uint64_t tmp_bytes_ = 0;
  RootPlan root_;
  mutable std::atomic<uint32_t> next_uid_{0};
};

// gpu_minor values: N >= 0 is /dev/nvidiaN (the only GPU node in the job's root, with the
// driver's control nodes); -1 is the cpu device (no GPU node at all); kUnknownGpuMinor: every
// /dev/nvidiaN (root_plan.h job_devices).
inline constexpr int kUnknownGpuMinor = -2;

// The minor number of the /dev/nvidiaN node of the GPU with PCI bus id `pci_bus_id`
// ("0000:1b:00.0"), from /proc/driver/nvidia/gpus/<id>/information; kUnknownGpuMinor when
// it cannot be found.
int nvidia_device_minor(const std::string& pci_bus_id);

}  // namespace kforge::workers
