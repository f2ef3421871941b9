// The `__global__` functions a CUDA source defines, found by a small scanner (comments,
// string and character literals and preprocessor lines are skipped; namespaces are tracked
// so a kernel in `namespace ops` is named "ops::scale", the NVRTC name expression that finds
// it). Used to pick the kernel of a `cuda` request that names none, as the kernel evaluation
// server did when a source held a single `__global__` function.
//
// The scanner does not preprocess: a kernel inside `#if 0` is still seen, and a kernel
// defined by a macro is not.
//
// Example:
//   KF_ASSIGN_OR_RETURN(std::string name, single_cuda_kernel(source));  // "vector_add"
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/status.h"

namespace kforge::model {

struct CudaKernelDecl {
  std::string name;          // qualified with its namespaces: "ops::scale"
  bool is_template = false;  // a template: launching it needs an instance ("scale<128>")
};

// Every `__global__` function declared or defined in `source`, once each, in source order.
std::vector<CudaKernelDecl> find_cuda_kernels(std::string_view source);

// The name of the only `__global__` function of `source`. kInvalidArgument (no field) when
// there is none, several (listed), or the only one is a template.
StatusOr<std::string> single_cuda_kernel(std::string_view source);

}  // namespace kforge::model
