// `kforge bench --ops a,b,c`: the multi-op pipeline (docs/bench.md). For each op, Phase 1
// from its manifest, Phase 2 the four versions (the kernel library, or --kernels DIR), Phase 3
// correctness and timing at each size as kforge jobs, Phase 4 the best version; writes
// <out>/<op>_log.md, <op>.svg, summary.md and bench.json. Jobs run in an embedded engine, or
// on a running `kforge serve` with --server URL. `--from-json FILE` renders a saved
// bench.json again (e.g. in the other --log-lang) without running anything.
// `--regenerate-cmd CMD` (with --kernels DIR) hands every failing version to CMD, which
// writes a new version file, and judges it again: at most --regenerate-tries runs per op
// (bench/regenerate.h has the command's contract).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine_flags.h"

namespace kforge::app {

struct BenchConfig {
  std::vector<std::string> ops;
  std::vector<std::string> sizes = {"small", "medium", "large"};
  std::string size_preset = "default";
  int runs = 10;
  int correct_trials = 5;
  double job_timeout_s = 600;
  std::string device;  // empty: the first GPU, else cpu
  std::string dtype;
  std::string kernels_dir;
  std::string out_dir = "logs";
  std::string log_lang = "en";
  bool no_peaks = false;
  bool no_torch_compile = false;
  std::optional<std::string> regenerate_cmd;   // unset: no regeneration loop
  std::optional<int> regenerate_tries;         // default 3
  std::optional<double> regenerate_timeout_s;  // default 1800
  std::string from_json;
  bool quiet = false;
  // Where jobs run.
  std::string server;
  std::string token;
  std::string data_dir;
  EngineFlags engine;
  std::string log_level = "warning";
};

CLI::App* add_bench_command(CLI::App& app, BenchConfig& config);

// Returns the process exit code: 0 when the logs were written, 2 for bad options or no
// engine, 1 when the bench could not complete, 130 when interrupted.
int run_bench(const BenchConfig& config);

}  // namespace kforge::app
