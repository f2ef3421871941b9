// The composition root: the one place that wires concrete classes together.
// Builds a ready-to-start JobServiceImpl from configuration: opens the store in the data
// directory, finds the devices (cpu and the visible GPUs), and creates their workers.
// Used by `kforge serve` and by `kforge mcp` (embedded engine).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kforge/common/files.h"
#include "kforge/common/status.h"
#include "kforge/jobs/job_service_impl.h"

namespace kforge::app {

struct EngineOptions {
  std::filesystem::path data_dir = ".kforge";
  // "all" (cpu + every visible GPU), "gpus", "cpu", or a comma list ("cpu,cuda:1").
  std::string devices = "all";
  std::string python;                           // empty: KFORGE_PYTHON, the set-up venv, python3
  std::filesystem::path worker_path;            // empty: found next to the executable
  int64_t child_memory_bytes = 0;               // RSS limit per job; 0: 3/4 of physical memory
  size_t output_cap_bytes = size_t{64} * 1024;  // per stream
  std::vector<std::string> worker_env;          // extra variable names passed to workers
  int max_attempts = 3;
  int warm_children_gpu = 3;  // warm child processes kept per GPU (see PythonWorkerOptions)
  int warm_children_cpu = 1;  // and on the cpu device
  // With pipelined stages: how many Python children may warm at once while jobs are queued
  // (Worker::expect_jobs); each holds a CUDA context while it waits for its job.
  int max_warm_children_gpu = 8;
  int max_warm_children_cpu = 1;
  // Jobs one judge process may serve, for one submitter and one reference (see
  // PythonWorkerOptions::jobs_per_judge); 1: a judge per job.
  int jobs_per_judge = 8;
  // Native CUDA worker processes (`kforge worker cuda`) kept started per GPU / on cpu.
  int warm_cuda_workers_gpu = 3;
  int warm_cuda_workers_cpu = 1;
  // Pipelined stages (issue 13): jobs in flight per GPU. 1: one job holds the GPU from start
  // to end. N > 1: up to N jobs per GPU; native `cuda` jobs compile concurrently and hold
  // the GPU (workers/device_gate.h) exclusively only for their GPU phase; Python jobs run
  // their import, compile and correctness under a shared grant and their timed regions
  // under an exclusive one. The cpu device always runs one job at a time (compiles would
  // skew its timing).
  int pipeline_depth = 1;
  // Test only (--test-cpu-pipeline-depth): pipelines the cpu device the same way, so tests
  // exercise the shared/exclusive grant without a GPU. Its CPU timings are not clean.
  int test_cpu_pipeline_depth = 1;
  std::filesystem::path executable;  // the kforge binary for `worker cuda`; empty: this one
  jobs::QueueLimits queue;           // unfinished jobs, in total and per client
  bool store_fsync = true;           // SQLite synchronous=FULL (false: NORMAL)
  // --store: "sqlite" (data-dir/kforge.db) or a postgresql:// URL (store/open_store.h), the
  // node's name in a shared store ("" : host-pid-random) and its claims' lease.
  std::string store = "sqlite";
  std::string node_id;
  int lease_seconds = 30;
  std::string version = "dev";
  // Job isolation (workers/sandbox_policy.h): auto | required | off.
  std::string sandbox = "auto";
  int64_t job_pids_max = 1024;
  uint64_t job_tmp_bytes = 0;  // each private tmpfs of a job process; 0: a quarter of its memory
  std::vector<std::string> jail_read_only;  // --jail-read-only: more host paths jobs see
  uint32_t sandbox_uid_base = 61000;
  std::string kernel_cache = "isolated";  // isolated | shared (SandboxOptions)
  bool device_metrics_default = false;    // see JobServiceImpl::Options
  std::filesystem::path cupy_cache_dir;   // CuPy's kernel cache for jobs; empty: cache/cupy
  std::string ncu;  // Nsight Compute executable; empty: `ncu` on PATH, else /usr/local/cuda/bin/ncu
};

// The job service and the lock on its data directory; destroy the service first.
struct Engine {
  std::unique_ptr<DataDirLock> data_dir_lock;
  std::unique_ptr<jobs::JobServiceImpl> service;
};

StatusOr<Engine> build_engine(const EngineOptions& options);

// The ncu executable: `configured` when it is one, else `ncu` on PATH, else the toolkit's;
// empty when none.
std::string find_ncu(const std::string& configured);
// The interpreter workers use when none is configured (see EngineOptions::python).
std::string default_python();
// The directory holding python/kforge_worker, searched upward from the executable.
StatusOr<std::filesystem::path> find_worker_path();
// libkforge_cuda.so (the C ABI the Python worker loads for `cuda` kernels): KFORGE_CUDA_ABI,
// else next to the executable or in ../lib (the build tree); empty when absent.
std::filesystem::path find_cuda_abi_library(const std::filesystem::path& executable);
// libkforge_sandbox.so (the jail's C ABI for the Python worker): KFORGE_SANDBOX_LIB, else next
// to the executable or in ../lib; empty when absent.
std::filesystem::path find_sandbox_library(const std::filesystem::path& executable);

}  // namespace kforge::app
