// JSON -> validated model types. Every error is kInvalidArgument with the JSON path of the
// offending field, e.g. "custom_kernel.io.args[2].tensor_spec.shape: must be a list of
// non-negative integers".
//
// Unknown fields are ignored (clients of the old server send extras); wrong types,
// out-of-range values and inconsistent combinations are rejected.
#pragma once

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/request.h"

namespace kforge::model {

StatusOr<KernelCode> parse_kernel_code(const Json& j, const JsonPath& path,
                                       const RequestLimits& limits);
StatusOr<IOContract> parse_io_contract(const Json& j, const JsonPath& path,
                                       const RequestLimits& limits);

// Body of `POST /evaluate`: {kernel, num_trials?, timeout?, device?, ...}. A `reference_kernel`
// (superset field) turns it into a compare of `kernel` against that reference.
StatusOr<JobRequest> parse_evaluate_request(const Json& body, const RequestLimits& limits);

// Body of `POST /compare` (and legacy `POST /`): {ref_kernel, custom_kernel, ...}.
StatusOr<JobRequest> parse_compare_request(const Json& body, const RequestLimits& limits);

// Checks the kernel-type rules (REFERENCE.md): triton and cuda need an IOContract,
// multi_kernel needs an IOContract and metadata.entry_point; and, for compares, that the
// two sides' declared inputs agree (REFERENCE.md §4).
Status check_request_consistency(const JobRequest& request, std::string_view kernel_field,
                                 std::string_view reference_field);

}  // namespace kforge::model
