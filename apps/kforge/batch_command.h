// `kforge batch`: KernelBench mode of POST /batch. A problem file (a KernelBench reference:
// Model, get_inputs, get_init_inputs) and a directory of candidates (one *.py per candidate,
// each a KernelBench ModelNew), judged as one batch on the same inputs, the reference's
// results computed once. Runs on an embedded engine, or on a server (--server: POST /batch).
// Prints one line per candidate (sorted by file name) and, with --out, writes the answer as
// JSON: {batch_id, problem, candidates: [{file, job_id, result}]}.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine_flags.h"

namespace kforge::app {

struct BatchConfig {
  std::string problem;
  std::string candidates_dir;
  std::string kernel_type = "torch_cuda";
  std::string device;
  int correct_trials = 5;
  int num_trials = 100;
  double timeout_s = 300;
  std::string out;
  std::string server;
  std::string token;
  std::string data_dir;
  EngineFlags engine;
  std::string log_level = "warning";
};

CLI::App* add_batch_command(CLI::App& app, BatchConfig& config);

// 0 when every candidate was judged (whatever the verdicts), 1 when the batch could not run,
// 2 for bad options.
int run_batch(const BatchConfig& config);

}  // namespace kforge::app
