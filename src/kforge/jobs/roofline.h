// The roofline summary of a timed kernel: achieved bandwidth and FLOP/s against the
// device's measured peaks (device_peaks.h), computed by the server from the request and the
// worker's timing (docs/architecture.md "Roofline").
//
// Work per call:
// - bytes: `metadata.bytes_moved` of the kernel (else of the other kernel of a compare:
//   both do the same work), source "metadata.bytes_moved"; else the sum of the tensor
//   arguments' sizes of its IOContract (inputs read once, outputs written once, inout
//   twice), source "io_contract_lower_bound"; else the input tensors the worker reported
//   (result metadata.inputs), source "inputs_lower_bound". The lower bounds assume every
//   byte crosses DRAM exactly once (a kernel can move more, never less, unless it reads
//   data L2 still holds).
// - FLOPs: `metadata.flops` (likewise), else unknown (FLOP/s is then null).
// - The FLOP/s peak is that of `metadata.flops_dtype` (fp32, tf32, fp16, bf16), else of the
//   first floating-point tensor argument's dtype (float32 -> fp32).
// Time: the headline median (ms).
#pragma once

#include <optional>
#include <string>

#include "kforge/common/json.h"
#include "kforge/model/kernel_spec.h"

namespace kforge::jobs {

struct KernelWork {
  std::optional<double> bytes;
  std::string bytes_source;
  std::optional<double> flops;
  std::string flops_source;
  std::string flops_dtype;  // "" when no floating-point tensor says
};

// `other` is the other kernel of a compare (or null); `reported_inputs` the result's
// metadata.inputs.
KernelWork work_of(const model::KernelCode& kernel, const model::KernelCode* other,
                   const Json& reported_inputs);

// {measured: true, time_ms, bytes_moved, bytes_source, flops, flops_source, achieved_gb_s,
//  achieved_tflop_s, peak_gb_s, peak_tflop_s, peak_flops_dtype, pct_of_peak_bandwidth,
//  pct_of_peak_flops} or {measured: false, reason}.
Json roofline(const KernelWork& work, std::optional<double> time_ms, const Json& peaks);

Json roofline_not_measured(const std::string& reason);

}  // namespace kforge::jobs
