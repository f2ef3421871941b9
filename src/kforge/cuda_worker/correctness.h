// Correctness trials of a native CUDA job (docs/evaluation-protocol.md "Correctness"), with the
// rules of the Python worker's judge/correctness.py. Every trial must pass; trials stop at the
// first failure.
//
// compare: per trial one set of inputs, defined by the candidate's IOContract. The
// reference (a `cuda` kernel too) runs on its own copies: its input/inout tensors take the
// defining ones in order, its output tensors start zeroed. The candidate's output buffers
// are then filled with values that differ from the expected ones at every element (so an
// element it never writes fails), it runs on fresh copies, and each of its written tensors
// (output/inout, in declared order) is compared with the reference's; its inputs must be
// unchanged.
//
// evaluate: the kernel runs twice per trial on identical inputs, with two different poison
// values in its output buffers; no element may keep the poison in both runs, the inputs
// must be unchanged and the two runs must agree within the tolerance.
#pragma once

#include <vector>

#include "kforge/cuda/cuda_device.h"
#include "kforge/cuda/host_inputs.h"
#include "kforge/cuda_worker/job_kernel.h"
#include "kforge/cuda_worker/job_result.h"
#include "kforge/cuda_worker/job_spec.h"

namespace kforge::cuda_worker {

struct CorrectnessContext {
  cuda::CudaDevice& device;
  JobKernel& candidate;
  JobKernel* reference;  // null for an evaluate
  const NativeJob& job;
  JobResult& result;
};

// Runs the trials and fills result.correctness_details (and error fields on failure).
bool run_correctness(CorrectnessContext& ctx);

// The tensors of a reference with its own IOContract, bound to the defining inputs
// (docs/evaluation-protocol.md, the compare rule). kInvalidArgument when it needs more input
// tensors than are defined.
StatusOr<std::vector<cuda::HostTensor>> bind_reference_tensors(
    const model::IOContract& reference_io, const std::vector<cuda::HostArg>& defining);

// The metadata `inputs` entry of a trial's arguments (no tensor contents).
Json describe_inputs(const model::IOContract& io);

}  // namespace kforge::cuda_worker
