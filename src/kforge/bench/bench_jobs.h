// How `kforge bench` turns the kernel library into ordinary kforge jobs (docs/bench.md
// "How a library kernel becomes a job"):
//
//   version x size   a compare: the manifest's torch reference as a `torch` kernel (class
//                    Model whose forward evaluates manifest.reference) against the version as a
//                    `multi_kernel` whose source is the version file, bundled whole, plus an
//                    entry point `kforge_entry(<args>)` that evaluates manifest.call; its
//                    IOContract holds the manifest's arguments with the size's shapes and the
//                    bench dtype. Correctness with the manifest's tolerance for that dtype,
//                    then exactly `runs` timed trials of each side (min = max = runs).
//   torch x size     an evaluate of the torch reference alone (the "torch" row).
//   compile x size   a compare of torch.compile(reference) (class ModelNew) against it.
//   peaks            evaluates of a device-to-device copy and of a matmul, whose mean times
//                    give the measured bandwidth and FLOP/s that Phase 4 compares against.
//
// On the cpu device the candidate source also carries kernels/interpreter_compat.py.
#pragma once

#include <cstdint>
#include <string>

#include "kforge/bench/kernel_library.h"
#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/request.h"

namespace kforge::bench {

// What every job of one bench shares.
struct JobSettings {
  std::string device;
  bool interpreter = false;  // the cpu device: Triton runs in its interpreter
  int runs = 10;             // timed trials per kernel and size
  int correct_trials = 5;
  double timeout_s = 600;
  std::string interpreter_compat;  // source of kernels/interpreter_compat.py
};

// One job of a bench: what it measures, for the report.
struct BenchJobSpec {
  model::JobRequest request;
  int64_t bytes = 0;  // moved per call (peaks), 0 when not a peak probe
  int64_t flops = 0;
};

// The torch reference module: `reference(<tensors>)` evaluating manifest.reference with the
// scalar arguments bound as constants, `class Model` calling it and, with `with_compiled`,
// `class ModelNew` calling torch.compile(reference).
std::string torch_reference_source(const OpManifest& manifest, bool with_compiled);

// The version's source, the interpreter fix when `settings.interpreter`, and kforge_entry.
std::string candidate_source(const OpManifest& manifest, const KernelVersion& version,
                             const JobSettings& settings);

// The IOContract (wire JSON) of the op at `size`: tensors (and scalars when `with_scalars`).
Json io_contract_json(const OpManifest& manifest, const SizeSpec& size, const std::string& dtype,
                      bool with_scalars);

StatusOr<model::JobRequest> version_request(const OpManifest& manifest, const SizeSpec& size,
                                            const std::string& dtype, const KernelVersion& version,
                                            const JobSettings& settings);
StatusOr<model::JobRequest> eager_request(const OpManifest& manifest, const SizeSpec& size,
                                          const std::string& dtype, const JobSettings& settings);
StatusOr<model::JobRequest> compile_request(const OpManifest& manifest, const SizeSpec& size,
                                            const std::string& dtype, const JobSettings& settings);

// x.clone() of a float32 buffer (1 GiB on a GPU, 64 MiB on cpu); bytes = read + written.
StatusOr<BenchJobSpec> copy_peak_job(const JobSettings& settings);
// a @ b of square matrices in `dtype` (8192 on a GPU, 512 on cpu); flops = 2 n^3.
StatusOr<BenchJobSpec> matmul_peak_job(const std::string& dtype, const JobSettings& settings);

// A Python literal for a JSON scalar (True/False/None, numbers, quoted strings).
std::string python_literal(const Json& value);

}  // namespace kforge::bench
