#include "kforge/cuda/compile_request.h"

#include "kforge/cuda/kernel_args.h"
#include "kforge/model/cuda_kernel_names.h"
#include "kforge/model/cuda_options.h"

namespace kforge::cuda {

StatusOr<CompileRequest> make_compile_request(const model::KernelCode& kernel,
                                              const std::string& arch, const std::string& field) {
  CompileRequest request;
  request.source = kernel.source_code;
  request.kernel_name = kernel.entry_point();
  request.arch = arch;
  if (request.kernel_name.empty()) {
    // No name: the source's only __global__ function, as the request parser picks it.
    auto only = model::single_cuda_kernel(kernel.source_code);
    if (!only.is_ok()) {
      return invalid_argument(only.status().message(), field + ".metadata.kernel_name");
    }
    request.kernel_name = *only;
  }
  KF_ASSIGN_OR_RETURN(request.options, model::parse_cuda_compile_options(
                                           kernel.metadata, JsonPath(field).key("metadata")));
  if (kernel.io) {
    for (auto& define : meta_defines(*kernel.io))
      request.options.push_back(std::move(define));
  }
  return request;
}

}  // namespace kforge::cuda
