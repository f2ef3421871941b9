// From MCP tool arguments to a validated JobRequest, with errors in the tool's own terms.
//
// The arguments of evaluate_kernel / validate_kernel / compare_kernels are mapped onto the
// body of the REST endpoint (POST /evaluate or /compare), then parsed by model::parse_*, so
// validation is the same as REST's. Field paths in errors are renamed back to argument
// names: "kernel.io.args[2].tensor_spec.shape" -> "io_contract.args[2].tensor_spec.shape",
// "ref_kernel.source_code" -> "ref_kernel_source", and so on.
//
// Example:
//   std::vector<std::string> warnings;
//   KF_ASSIGN_OR_RETURN(auto request, job_request_from_arguments(KernelTool::kEvaluate, args,
//                                                                 limits, warnings));
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/frontends/mcp/kernel_tool_schemas.h"
#include "kforge/model/request.h"

namespace kforge::frontends::mcp {

// The arguments in the flat form the tool's inputSchema describes, from any form the kernel
// evaluation server's tools accepted (docs/compatibility.md §1, "MCP tools"):
// - flat arguments (kernel_source, kernel_type, ...), as they are;
// - one `request` object holding the flat arguments;
// - one `request` object holding the REST body (the later revision of those tools took
//   EvaluationRequest {kernel, num_trials, timeout} / CompareRequest {ref_kernel,
//   custom_kernel, ...}), mapped to the flat names (kernel.source_code -> kernel_source, ...).
// Members that are null are dropped at every depth: null means "not given", as there.
Json normalize_arguments(Json arguments);

// Removes null members of objects, at every depth (array elements are kept).
void drop_nulls(Json& value);

// The REST body the arguments stand for (defaults filled in). `warnings` receives notes on
// accepted-but-unused arguments (none at present).
StatusOr<Json> rest_body_from_arguments(KernelTool tool, const Json& arguments,
                                        std::vector<std::string>& warnings);

// rest_body_from_arguments + model::parse_evaluate_request / parse_compare_request, with
// errors renamed to argument names.
StatusOr<model::JobRequest> job_request_from_arguments(KernelTool tool, const Json& arguments,
                                                       const model::RequestLimits& limits,
                                                       std::vector<std::string>& warnings);

// A REST field path in the tool's argument names ("kernel.io" -> "io_contract"); other
// paths are returned unchanged.
std::string argument_path(KernelTool tool, std::string_view rest_path);

// The status with its field path and the REST paths quoted in its message renamed.
Status in_argument_terms(KernelTool tool, const Status& status);

}  // namespace kforge::frontends::mcp
