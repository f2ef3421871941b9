// `POST /batch` (and the MCP tool batch_compare): one reference, N candidates, the compare
// options once. Each candidate becomes an ordinary compare job; the batch shares one seed, so
// every candidate is judged on the same inputs and the reference's outputs and timing can be
// computed once (docs/worker-protocol.md "Reference reuse").
#pragma once

#include <cstdint>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/request.h"

namespace kforge::model {

struct BatchRequest {
  // One compare per candidate, in order; every option (seed included, when given) the same.
  std::vector<JobRequest> jobs;
};

// Body {"ref_kernel": KernelCode, "candidates": [KernelCode, ...], ...compare options}.
// Errors name the field as the client sent it: "candidates[3].source_code",
// "ref_kernel.io.args[0].name", "candidates" (empty, too many: limits.max_batch_candidates).
// `custom_kernel` is refused (field "custom_kernel": a batch has `candidates`).
StatusOr<BatchRequest> parse_batch_request(const Json& body, const RequestLimits& limits);

// The `batch` member of a stored request (model::to_request_json); nullopt when absent.
StatusOr<std::optional<BatchMembership>> parse_batch_membership(const Json& stored);

}  // namespace kforge::model
