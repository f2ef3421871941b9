// The NVRTC compile request of a `cuda` KernelCode: its source, metadata.kernel_name (or
// entry_point; when neither is given, the source's only __global__ function), the
// allow-listed metadata.compile_options and one -D per is_meta argument.
#pragma once

#include <string>

#include "kforge/common/status.h"
#include "kforge/cuda/compiled_kernel.h"
#include "kforge/model/kernel_spec.h"

namespace kforge::cuda {

// kInvalidArgument naming `<field>.metadata.compile_options[i]` for a refused option.
StatusOr<CompileRequest> make_compile_request(const model::KernelCode& kernel,
                                              const std::string& arch, const std::string& field);

}  // namespace kforge::cuda
