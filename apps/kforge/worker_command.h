// `kforge worker cuda`: the native CUDA worker process (started by the server; see
// docs/worker-protocol.md), or one job spec run from a file with --job.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kforge::app {

struct WorkerConfig {
  std::string device = "cpu";  // "cpu" or "cuda:N"
  std::string arch;            // compile target without a GPU (default sm_90a)
  std::string job_file;        // run this job spec and print the result (no supervisor)
  std::string replay_file;     // launch one kernel of this job spec once (under a profiler)
  std::string role = "candidate";
  int repeat = 1;          // launches in a replay
  std::string why_no_gpu;  // the server's reason when it has no GPU
  int protocol_fd = 3;
};

// Registers `worker` with its `cuda` subcommand; returns the `cuda` subcommand.
CLI::App* add_worker_command(CLI::App& app, WorkerConfig& config);

int run_worker_cuda(const WorkerConfig& config);

}  // namespace kforge::app
