// What `kforge serve`, `kforge mcp` and `kforge bench` (their embedded engines) share: the job
// engine's flags, starting an embedded engine, and the process's signal set-up.
#pragma once

#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kforge/app/engine.h"
#include "kforge/jobs/retention.h"

namespace kforge::app {

struct EngineFlags {
  std::string devices = "all";  // "all", "cpu", "gpus", or a list "cpu,cuda:0"
  std::string python;           // empty: KFORGE_PYTHON, the set-up venv, then python3
  std::string worker_path;      // empty: found next to the executable
  int warm_children_gpu = 3;
  int warm_children_cpu = 1;
  int max_warm_children_gpu = 8;  // pipelined: children warming at once ahead of queued jobs
  int max_warm_children_cpu = 1;
  int jobs_per_judge = 8;           // jobs a judge may serve (one submitter, one reference)
  int pipeline_depth = 1;           // jobs in flight per GPU (pipelined stages)
  int test_cpu_pipeline_depth = 1;  // test only: the same for the cpu device
  int warm_cuda_workers_gpu = 3;    // started `kforge worker cuda` processes per GPU
  int warm_cuda_workers_cpu = 1;
  std::vector<std::string> worker_env;
  std::string sandbox = "auto";  // auto | required | off
  int64_t job_pids_max = 1024;
  int64_t job_tmp_mb = 0;                   // 0: a quarter of the job memory limit
  std::vector<std::string> jail_read_only;  // more host paths jobs see, read-only
  uint32_t sandbox_uid_base = 61000;
  std::string kernel_cache = "isolated";
  bool device_metrics = false;  // Nsight Compute metrics for requests that do not say
  std::string ncu;              // Nsight Compute executable; empty: PATH, /usr/local/cuda/bin
  std::string cupy_cache_dir;   // CuPy's kernel cache for jobs (CUPY_KERNEL_CACHE_DIR)
  std::string job_retention = "24h";
  jobs::QueueLimits queue;                  // --max-queued-*
  std::string sqlite_synchronous = "full";  // "full" or "normal"
  std::string store = "sqlite";             // "sqlite" or postgresql://... (several nodes)
  std::string node_id;                      // a shared store's name for this node
  int lease_seconds = 30;                   // how long a claimed job survives its node
};

// Registers --devices (described by `devices_help`), --python, --worker-path,
// --warm-children[-cpu], --max-warm-children[-cpu], --warm-cuda-workers[-cpu], --worker-env,
// --sandbox, --job-pids-max,
// --kernel-cache, --sandbox-uid-base, --device-metrics (ENABLE_DEVICE_METRICS), --ncu,
// --cupy-cache-dir (CUPY_KERNEL_CACHE_DIR), --job-retention, the queue limits
// (--max-queued-jobs, --max-queued-bytes, --max-queued-per-client,
// --max-queued-bytes-per-client), --sqlite-synchronous and the store (--store, --node-id,
// --lease-seconds).
void add_engine_flags(CLI::App& cmd, EngineFlags& flags, std::string_view devices_help);

// The engine options the flags give (data directory and the serve-only limits left default).
app::EngineOptions engine_options(const EngineFlags& flags);

// The embedded engine of a client command (`kforge mcp`, `kforge bench`), with its job service
// not yet started. Without `data_dir`: ~/.cache/kforge/<default_name> (XDG_CACHE_HOME
// respected); a data directory is locked by one process at a time, so a second process takes
// <default_name>-2, and so on up to -8.
struct EmbeddedEngine {
  app::Engine engine;
  std::filesystem::path data_dir;  // the one it locked
};
StatusOr<EmbeddedEngine> start_embedded_engine(const EngineFlags& flags,
                                               const std::string& data_dir,
                                               const std::string& default_name);

// ~/.cache/kforge (XDG_CACHE_HOME respected): where client commands keep their data.
std::filesystem::path default_data_root();

// Starts deleting finished jobs older than --job-retention (null when it is 0); destroy it
// before the service. kInvalidArgument naming --job-retention for a bad value.
StatusOr<std::unique_ptr<jobs::RetentionSweeper>> start_retention(const EngineFlags& flags,
                                                                  jobs::JobService& service);

// Blocks SIGINT and SIGTERM in this thread and every thread it starts afterwards (one thread
// takes them with sigwait on the returned set), and ignores SIGPIPE, so a client that goes
// away makes writes fail instead of killing the process. Call before starting threads.
sigset_t block_termination_signals();
// SIGINT and SIGTERM, the set the function above blocks.
sigset_t termination_signals();

// Runs on_signal(signal) on a thread of its own when one of `signals` (blocked in every thread:
// block_termination_signals) arrives. Destroying it ends that thread, after on_signal if a
// signal came: the thread waits in slices of 100 ms, so nothing has to send it a signal to
// wake it.
class SignalWatch {
 public:
  SignalWatch(const sigset_t& signals, std::function<void(int)> on_signal);
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace kforge::app
