// `kforge kernelbench`: evaluates a KernelBench generation run the way its users do with
// scripts/eval_from_generations.py, as batches on kforge's engine. It finds every
// runs/<run>/level_<L>_problem_<P>_sample_<S>_kernel.py of the chosen levels and problems,
// judges each against its problem's Model (KernelBench's settings by default: 5 correctness
// trials, 100 timed, get_inputs/get_init_inputs, atol=rtol=1e-4 (fp32), the reference timed on the
// same device in the same series), one batch per problem (the reference computed once),
// several problems in flight, and writes into --out (default: the run directory):
//   kernelbench_samples.jsonl  one record per sample (bench/kernelbench.h), appended as each
//                              finishes; a re-run skips samples judged with the same source
//   eval_results.json          KernelBench's shape (level_<L>/eval_results.json for several
//                              levels), readable by its benchmark_eval_analysis.py
//   kernelbench_summary.json   correctness rate, fast_p, geometric-mean speedup, per level
// and keeps the reference's times per device and problem source in a baselines cache
// (--baselines), exported as generate_baseline_time.py's JSON with --baseline-json.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "engine_flags.h"

namespace kforge::app {

struct KernelbenchConfig {
  std::string kb;
  std::string levels = "1";
  std::string run_dir;
  std::string problems;  // empty: every problem of each level
  std::optional<int> samples;
  std::string device;
  std::string kernel_type = "torch_cuda";
  int correct_trials = 5;
  // KernelBench's fp32 tolerance (its get_tolerance_for_precision; 1e-2 before its v0.2).
  double atol = 1e-4;
  double rtol = 1e-4;
  int num_trials = 100;
  double timeout_s = 180;
  int in_flight = 4;
  std::string fast_p;
  std::string out;
  std::string baselines;      // empty: ~/.cache/kforge/kernelbench-baselines.json
  std::string baseline_json;  // export path
  bool rerun = false;
  bool quiet = false;
  std::string server;
  std::string token;
  std::string data_dir;
  EngineFlags engine;
  std::string log_level = "warning";
};

CLI::App* add_kernelbench_command(CLI::App& app, KernelbenchConfig& config);

// 0 when every sample has a record (whatever the verdicts), 130 when interrupted (what
// finished is written), 1 when the run could not run, 2 for bad options.
int run_kernelbench(const KernelbenchConfig& config);

}  // namespace kforge::app
