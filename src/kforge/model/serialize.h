// Model types -> canonical JSON (defaults filled in). The canonical form is what the
// worker receives and what the store keeps; parse.h reads it back unchanged.
#pragma once

#include "kforge/common/json.h"
#include "kforge/model/request.h"

namespace kforge::model {

Json to_json(const TensorSpec& spec);
Json to_json(const ArgSpec& arg);
Json to_json(const IOContract& io);
Json to_json(const KernelCode& kernel);
Json to_json(const TimingOptions& timing);

// The request in the wire shape of the endpoint it came from: {kernel, ...} for an
// evaluate, {ref_kernel, custom_kernel, ...} for a compare. parse_evaluate_request /
// parse_compare_request accept it and give back an equal JobRequest.
Json to_request_json(const JobRequest& request);

}  // namespace kforge::model
