// A bench's options and its plan: the ops with their manifests and versions, and every job
// to run, in order (per op: each version at each size, then torch and torch.compile at each
// size; the peak probes first). docs/bench.md describes the pipeline.
//
// Example:
//   BenchOptions o;
//   o.ops = {"add", "softmax"};
//   o.library = *find_kernel_library();
//   KF_ASSIGN_OR_RETURN(BenchPlan plan, plan_bench(o, service.health()));
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kforge/bench/bench_jobs.h"
#include "kforge/bench/kernel_library.h"
#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/request.h"

namespace kforge::bench {

// Which of a manifest's size profiles a bench runs: "default" is the device's (the `cpu`
// sizes on the cpu device, where Triton runs in its interpreter; the `gpu` sizes on a GPU),
// "seed" the `gpu` sizes (256x256, 1024x1024, 4096x4096 for the 2-D ops) on any device.
inline constexpr std::array<std::string_view, 2> kSizePresets = {"default", "seed"};

struct BenchOptions {
  std::vector<std::string> ops;
  std::vector<std::string> sizes = {"small", "medium", "large"};
  std::string size_preset = "default";  // one of kSizePresets
  int runs = 10;                        // timed runs per kernel and size
  int correct_trials = 5;
  double job_timeout_s = 600;
  std::string device;             // empty: the service's first GPU, else cpu
  std::string dtype;              // empty: each op's default_dtype
  std::filesystem::path library;  // the kernel library (kernels/)
  // Versions from <kernels_dir>/<op>/ (and its manifest.json when it has one) instead of the
  // library: how an agent's own kernels are benchmarked.
  std::filesystem::path kernels_dir;
  // Versions given as source (POST /bench, run_benchmark_suite): op -> version -> source.
  std::map<std::string, std::map<std::string, std::string>> inline_kernels;
  // Regenerations an agent needed per version (op -> version -> count), for the logs; with
  // kernels_dir also read from <kernels_dir>/<op>/retries.json.
  std::map<std::string, std::map<std::string, int>> retries;
  bool peaks = true;          // measure copy bandwidth / matmul FLOP/s for Phase 4
  bool torch_compile = true;  // the torch.compile baseline (slow to compile on the cpu device)
  std::string kforge_version = "dev";
};

// Checks ranges and names; kInvalidArgument naming the field ("ops", "sizes[1]", "runs", ...).
Status validate_options(const BenchOptions& options);

enum class JobRole { kVersion, kTorch, kTorchCompile, kCopyPeak, kMatmulPeak };

struct PlannedJob {
  JobRole role = JobRole::kVersion;
  int op = -1;          // index into BenchPlan::ops; -1 for the peak probes
  std::string version;  // kVersion
  std::string size;     // not for peaks
  std::string dtype;
  int64_t bytes = 0;  // peak probes: moved / computed per call
  int64_t flops = 0;
  std::string label;  // "softmax v2_tiling large", for progress messages
  model::JobRequest request;
};

struct OpPlan {
  OpManifest manifest;
  std::filesystem::path manifest_path;  // the manifest.json it came from
  std::string dtype;
  std::string kernels_origin;  // "library", the --kernels directory, or "inline"
  std::vector<KernelVersion> versions;
  std::map<std::string, int> retries;  // by version
  OpTests tests;                       // its per-op tests directory (kernel_library.h)
  // version -> the tries of `kforge bench --regenerate-cmd` (regenerate.h), in order.
  Json regeneration = Json::object();
};

struct BenchPlan {
  BenchOptions options;
  std::string device;
  bool interpreter = false;  // the cpu device
  std::string profile;       // the manifests' size profile run: "cpu" or "gpu"
  Json device_facts;         // from health(): name, sm_count, ... (GPU) or kind cpu
  JobSettings settings;      // what every job shares
  Json regenerate;           // RegenerateOptions::to_json() when the loop ran; null otherwise
  std::vector<OpPlan> ops;
  std::vector<PlannedJob> jobs;
};

// Validates the options, picks the device (from JobService::health()), reads manifests and
// versions, and builds every job. Blocks: reads files and, for a kernels_dir, writes the
// per-op tests an op directory lacks (ensure_op_tests).
StatusOr<BenchPlan> plan_bench(const BenchOptions& options, const Json& health);

// The jobs of `version` of plan.ops[op] at every size of the plan (a regenerated version).
StatusOr<std::vector<PlannedJob>> version_jobs(const BenchPlan& plan, int op,
                                               const KernelVersion& version);

// "v1_baseline" ... for a version name; false for anything else.
bool is_version_name(std::string_view name);

}  // namespace kforge::bench
