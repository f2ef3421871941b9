// JSON -> validated model types: the request shapes (POST /evaluate, /compare, the legacy
// body) and the kernel code in them, read with json_reader.h and checked with the kernel
// rules of kernel_rules.h. Every error is kInvalidArgument with the JSON path of the
// offending field, e.g. "custom_kernel.io.args[2].tensor_spec.shape: must be a list of
// non-negative integers".
//
// Unknown fields are ignored (clients of the old server send extras); wrong types,
// out-of-range values and inconsistent combinations are rejected.
#pragma once

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/kernel_rules.h"
#include "kforge/model/request.h"

namespace kforge::model {

// Inline tensor data (`data_b64`) is always decoded (and inflated) to check its size; kKeep
// keeps the bytes in TensorData::bytes for whoever builds the tensors from them (the native
// worker's job spec, model/job_spec.h). kCheck (the server's requests) drops them: the server
// never holds a request's inflated tensors.
enum class InlineData { kCheck, kKeep };

StatusOr<KernelCode> parse_kernel_code(const Json& j, const JsonPath& path,
                                       const RequestLimits& limits,
                                       InlineData inline_data = InlineData::kCheck);
StatusOr<IOContract> parse_io_contract(const Json& j, const JsonPath& path,
                                       const RequestLimits& limits,
                                       InlineData inline_data = InlineData::kCheck);

// A `timing` object: the fields given replace those of `timing`; min_trials is at most
// max_trials.
StatusOr<TimingOptions> parse_timing_object(const Json& t, const JsonPath& path,
                                            TimingOptions timing, const RequestLimits& limits);

// Body of `POST /evaluate`: {kernel, num_trials?, timeout?, device?, ...}. A `reference_kernel`
// (superset field) turns it into a compare of `kernel` against that reference.
StatusOr<JobRequest> parse_evaluate_request(const Json& body, const RequestLimits& limits);

// Body of `POST /compare` (and legacy `POST /`): {ref_kernel, custom_kernel, ...}.
StatusOr<JobRequest> parse_compare_request(const Json& body, const RequestLimits& limits);

}  // namespace kforge::model
