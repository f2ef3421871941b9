// The inputs of a cuda-only job, generated on the host from the IOContract.
//
// Seeds are derived exactly as the Python worker derives them (SHA-256 of
// "<server seed>:trial:<t>:arg:<name>:init:<init.seed or None>", first 8 bytes little-endian,
// shifted right by one), but the random numbers come from kforge's own generator
// (xoshiro256**, one per chunk of 65536 elements, seeded by SplitMix64 from the tensor's
// seed and the chunk index; Box-Muller for randn), not torch's: the same job gives the same
// inputs on every run of the native worker, whatever the number of threads that generate
// them (chunks are filled in parallel), but not the tensors torch would draw.
// Jobs that compare a cuda kernel with a torch reference run in the Python worker, which
// draws the inputs with torch and calls the kernel through the C ABI (kforge_cuda.h).
//
// Init kinds follow the Python worker: randn(mean, std), uniform [low, high) for floats,
// integers uniform in [ceil(low), floor(high)], no init = randn (floats) / uniform 0..9
// (integers) / fair coin (bool), zeros, ones, full, arange(start, step), literal `data`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/cuda/host_tensor.h"
#include "kforge/model/kernel_spec.h"

namespace kforge::cuda {

// derive_seed(1234, {"trial", "0", "arg", "x", "init", "None"}) as in core/inputs.py.
uint64_t derive_seed(uint64_t server_seed, const std::vector<std::string>& parts);

// One tensor argument of a trial. `data` holds the contents for input/inout tensors and a
// zero-filled buffer of the right size for output tensors (poisoned before each run).
struct HostArg {
  const model::ArgSpec* spec = nullptr;
  HostTensor data;
};

// The tensor arguments of trial `trial`, in declared order. kInvalidArgument naming the
// argument when one cannot be built.
StatusOr<std::vector<HostArg>> make_host_inputs(const model::IOContract& io, uint64_t server_seed,
                                                int trial);

// A tensor per spec, with an already derived seed.
StatusOr<HostTensor> make_host_tensor(const model::TensorSpec& spec, uint64_t seed);

}  // namespace kforge::cuda
