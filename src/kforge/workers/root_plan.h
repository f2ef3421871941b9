// What of the host a jailed job sees (docs/security.md "The jail's file system"): the one
// place that decides it, once at start, from the configuration. Every jail's root
// (sandbox/jail_spec.h) is made of this plan plus the process's own writable places; /health
// shows it under sandbox.root.
//
// Read-only, each for a reason:
// - "system": the distribution's programs, libraries and headers (/usr/bin, /usr/sbin,
//   /usr/lib, /usr/lib64, /usr/libexec, /usr/include and /bin, /sbin, /lib, /lib64), which
//   Triton's launcher build (cc, as, ld, libc headers), ldconfig and the dynamic loader
//   need; /etc/ld.so.cache and /etc/alternatives (/usr/bin/cc -> /etc/alternatives/cc);
// - "python": what the workers' interpreter reports (host_query.h): its standard library,
//   site-packages (torch, Triton and its ptxas, the CUDA wheels), headers, LIBDIR, scripts,
//   its executable, the whole venv when it is one, and its sys.path entries, except the
//   directory of the worker package (the package alone is bound);
// - "kforge": the kforge_worker package, the kforge binary, libkforge_cuda.so and
//   libkforge_sandbox.so (not the rest of the checkout);
// - "cuda": where the loader finds the driver's libraries (libcuda.so.1, libnvidia-*),
//   NVRTC's directory and the headers beside it, the toolkit ($CUDA_HOME, $CUDA_PATH,
//   /usr/local/cuda: nvcc, headers), KFORGE_CUDA_INCLUDE, LD_LIBRARY_PATH's directories;
// - "ncu": Nsight Compute's installation (--ncu; it runs inside the jail).
// Devices: null, zero, full, random, urandom, tty; for a GPU job the driver's control nodes
// and the job's own /dev/nvidiaN. Files: a synthesized /etc/hosts and /etc/nsswitch.conf.
// No /etc/passwd: jobs learn their name from USER and their home from HOME.
//
// A read-only path that is `/`, or holds the data directory, or lies in it, is refused at
// start with an error naming the path and where it came from.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::workers {

struct RootPlanOptions {
  std::string python;                               // the workers' interpreter; "": none
  std::map<std::string, std::string> worker_env;    // its environment (PYTHONPATH, LD_LIBRARY_PATH)
  std::filesystem::path worker_package;             // <worker path>/kforge_worker
  std::vector<std::filesystem::path> kforge_files;  // the binary, libkforge_*.so
  std::string nvrtc_library;                        // "": found on the library path
  std::string ncu;                                  // "": none
  std::filesystem::path data_dir;                   // never shown
  std::vector<std::string> extra;                   // --jail-read-only: the operator's paths
  bool ask_host = true;  // false (tests): no interpreter or loader is run
};

struct RootEntry {
  std::string path;
  std::string why;  // system, python, kforge, cuda, ncu
};

struct RootPlan {
  std::vector<RootEntry> read_only;
  // Directories made on the way to a read-only path that a job may list: the worker
  // package's parent, a sys.path entry where a new interpreter in the jail (ncu's replay)
  // looks for kforge_worker; it shows that package alone.
  std::vector<std::string> listable;
  std::string libcuda_dir;   // where the loader finds libcuda.so.1; "" on a host without
  std::string python_error;  // why the interpreter could not say where its files are

  std::vector<std::string> read_only_paths() const;
  // For /health: {"kind": "minimal", "read_only": [...], "why": {path: reason}, ...}.
  Json describe() const;
};

StatusOr<RootPlan> plan_root(const RootPlanOptions& options);

// The device nodes of a job on the GPU whose /dev/nvidia minor is `gpu_minor` (N: only
// /dev/nvidiaN with the control nodes; -1, the cpu device: none of the GPU's; any other
// value, unknown: every /dev/nvidiaN).
std::vector<std::string> job_devices(int gpu_minor);

// Small files every root holds (/etc/hosts, /etc/nsswitch.conf), and its symlinks (/dev/fd).
std::map<std::string, std::string> root_files();
std::map<std::string, std::string> root_links();

}  // namespace kforge::workers
