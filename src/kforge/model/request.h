// Evaluation requests as the engine sees them, after validation.
//
// `POST /evaluate`, `POST /compare`, the MCP tools and the CLI all produce a JobRequest;
// the JobService stores it and the worker receives it (serialize.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kforge/model/kernel_spec.h"

namespace kforge::model {

enum class JobKind {
  kEvaluate,  // one kernel: compile, self-consistency checks, timing
  kCompare,   // reference vs candidate: correctness against the reference, both timed
};

std::string_view to_string(JobKind k);
std::optional<JobKind> job_kind_from(std::string_view s);

// How timing is done (docs/evaluation-protocol.md "Timing"). Trials continue until the relative
// standard error of the mean drops under `rse_target`, or `max_trials`, or `budget_ms` is spent,
// but never fewer than `min_trials`.
struct TimingOptions {
  int max_trials = 100;  // `num_trials` on the wire
  int min_trials = 3;
  int warmup_calls = 3;       // at least this many warm-up calls (`num_warmup`)
  double warmup_ms = 25.0;    // and at least this long
  double budget_ms = 2000.0;  // per kernel, timed trials only
  double rse_target = 0.005;  // 0.5 %
  bool cuda_graph = false;    // time CUDA-graph replays instead of eager launches
  bool l2_flush = true;       // flush L2 before every trial (outside the timed window)
};

// A job's place in a batch (`POST /batch`): one compare per candidate.
struct BatchMembership {
  std::string id;  // the batch id
  int index = 0;   // the candidate's position in the batch
  int size = 0;    // how many candidates the batch has
};

struct JobRequest {
  JobKind kind = JobKind::kEvaluate;
  KernelCode kernel;                    // candidate (`custom_kernel` for a compare)
  std::optional<KernelCode> reference;  // present for compares
  int num_correct_trials = 5;
  bool measure_performance = true;  // false for validate-only requests
  TimingOptions timing;
  double timeout_s = 120.0;  // whole job, compile included
  std::string device;        // "" = scheduler chooses (a GPU when there is one)
  std::optional<double> atol;
  std::optional<double> rtol;
  std::optional<uint64_t> seed;  // the server draws one when absent
  // Nsight Compute device metrics (`enable_device_metrics`); absent: the server's default
  // (--device-metrics / ENABLE_DEVICE_METRICS).
  std::optional<bool> enable_device_metrics;
  // Set by the server for the jobs of a `POST /batch` (never read from a client's body):
  // the reference's outputs and timing are computed once per batch and reused (batch.h).
  std::optional<BatchMembership> batch;
};

// Bounds on what a request may ask for; violations are 400s naming the field. The timeout
// and trial bounds are the kernel evaluation server's.
struct RequestLimits {
  double min_timeout_s = 5.0;
  double max_timeout_s = 600.0;
  int max_trials = 10000;
  int max_correct_trials = 1000;
  int64_t max_tensor_bytes = int64_t{16} << 30;  // per tensor, 16 GiB
  // Literal tensor data (`data_b64`, inflated when zlib) per tensor, decoded at parse time.
  int64_t max_inline_data_bytes = int64_t{256} << 20;
  size_t max_args = 256;
  int max_tensor_rank = 8;
  // Candidates of one `POST /batch` (and the MCP tool batch_compare).
  size_t max_batch_candidates = 64;
};

}  // namespace kforge::model
