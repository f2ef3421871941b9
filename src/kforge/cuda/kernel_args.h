// Turns a `cuda` kernel's IOContract into cuLaunchKernel's arguments.
//
// Non-meta arguments are passed in declared order: a tensor as its device address (a
// pointer to the dtype's C type, see c_pointer_type), an `int` as a C int, a `float` as a
// C float, a `bool` as a C bool. Where the driver reports the kernel's parameter sizes
// (cuFuncGetParamInfo), they decide: an `int` parameter of 8 bytes gets a long long, a
// `float` of 8 bytes a double, and a count or size that does not match the contract is an
// error naming the argument. `is_meta` arguments are not parameters: they become
// `-D<name>=<value>` compile options (meta_defines), like Triton's constexprs.
// Launch dimensions come from io.launch (grid and block required, shared_mem_bytes 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/cuda/kernel_launcher.h"
#include "kforge/model/kernel_spec.h"

namespace kforge::cuda {

// The parameter sizes of a kernel in bytes, in order; nullopt where unknown.
using ParamSizes = std::optional<std::vector<size_t>>;

struct MarshalledArg {
  std::string name;
  std::string c_type;  // "float*", "int", "long long", "double", "bool"
  size_t size = 0;
};

// Owns the parameter values and the pointer array cuLaunchKernel reads.
class KernelArgs {
 public:
  KernelArgs() = default;
  KernelArgs(KernelArgs&&) = default;
  KernelArgs& operator=(KernelArgs&&) = default;

  void** params() { return pointers_.data(); }
  size_t size() const { return described_.size(); }
  const std::vector<MarshalledArg>& described() const { return described_; }
  // The bytes of parameter i (its value as the kernel receives it).
  std::span<const std::byte> bytes(size_t i) const {
    return {storage_[i].data(), described_[i].size};
  }

 private:
  friend StatusOr<KernelArgs> marshal_kernel_args(const model::IOContract&,
                                                  std::span<const uint64_t>, const ParamSizes&);
  std::vector<std::array<std::byte, 8>> storage_;
  std::vector<void*> pointers_;
  std::vector<MarshalledArg> described_;
};

// `tensor_ptrs`: device addresses of the contract's tensor arguments, in declared order.
StatusOr<KernelArgs> marshal_kernel_args(const model::IOContract& io,
                                         std::span<const uint64_t> tensor_ptrs,
                                         const ParamSizes& param_sizes);

StatusOr<LaunchDims> launch_dims(const model::IOContract& io);

// "-DBLOCK=256" for each is_meta argument (bool as 1/0).
std::vector<std::string> meta_defines(const model::IOContract& io);

// The C type a kernel should declare for a tensor of `dtype`: "float*", "__half*",
// "__nv_bfloat16*", "double*", "signed char*", "short*", "int*", "long long*", "bool*".
std::string_view c_pointer_type(model::DType dtype);

// Marshals and launches once: the path both the native worker and the C ABI take.
Status launch_with_contract(KernelLauncher& launcher, const model::IOContract& io,
                            std::span<const uint64_t> tensor_ptrs, const ParamSizes& param_sizes,
                            CUstream stream);

}  // namespace kforge::cuda
