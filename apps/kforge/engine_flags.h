// What `kforge serve` and `kforge mcp` (its embedded engine) share: the job engine's flags
// and the process's signal set-up.
#pragma once

#include <signal.h>

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/jobs/engine.h"

namespace kforge::app {

struct EngineFlags {
  std::string devices = "all";  // "all", "cpu", "gpus", or a list "cpu,cuda:0"
  std::string python;           // empty: KFORGE_PYTHON, the set-up venv, then python3
  std::string worker_path;      // empty: found next to the executable
  int warm_children_gpu = 3;
  int warm_children_cpu = 1;
  int warm_cuda_workers_gpu = 3;  // started `kforge worker cuda` processes per GPU
  int warm_cuda_workers_cpu = 1;
  std::vector<std::string> worker_env;
  bool device_metrics = false;  // default of enable_device_metrics (ENABLE_DEVICE_METRICS)
  std::string ncu;              // Nsight Compute executable; empty: PATH, /usr/local/cuda/bin
};

// Registers --devices (described by `devices_help`), --python, --worker-path,
// --warm-children[-cpu], --warm-cuda-workers[-cpu], --worker-env, --device-metrics and --ncu.
void add_engine_flags(CLI::App& cmd, EngineFlags& flags, std::string_view devices_help);

// The engine options the flags give (data directory and the serve-only limits left default).
jobs::EngineOptions engine_options(const EngineFlags& flags);

// Blocks SIGINT and SIGTERM in this thread and every thread it starts afterwards (one thread
// takes them with sigwait on the returned set), and ignores SIGPIPE, so a client that goes
// away makes writes fail instead of killing the process. Call before starting threads.
sigset_t block_termination_signals();

}  // namespace kforge::app
