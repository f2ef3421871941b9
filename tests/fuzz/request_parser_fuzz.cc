// libFuzzer target: the REST request parser (model::parse_*), as POST /evaluate, /compare
// and the MCP kernel tools reach it: bytes -> parse_json -> parse_*_request.
// Oracles: no crash or sanitizer report; an accepted request survives the round trip through
// its canonical JSON (model::to_request_json) unchanged, as serialize.h promises. The same
// bytes as a worker's job spec (model::parse_job_spec): an accepted spec is a fixed point of
// its canonical form (model::to_json(JobSpec)).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/model/job_spec.h"
#include "kforge/model/parse.h"
#include "kforge/model/serialize.h"

namespace {

using kforge::Json;
using kforge::model::JobKind;
using kforge::model::JobRequest;
using kforge::model::RequestLimits;

void check_round_trip(const JobRequest& request, const RequestLimits& limits) {
  const Json canonical = kforge::model::to_request_json(request);
  auto again = request.kind == JobKind::kCompare
                   ? kforge::model::parse_compare_request(canonical, limits)
                   : kforge::model::parse_evaluate_request(canonical, limits);
  if (!again.is_ok() || kforge::model::to_request_json(*again) != canonical) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto json = kforge::parse_json(text);
  if (!json.is_ok()) return 0;
  RequestLimits limits;
  limits.max_tensor_bytes = int64_t{1} << 20;  // data_b64 tensors are decoded: keep them small
  for (auto parse :
       {&kforge::model::parse_evaluate_request, &kforge::model::parse_compare_request}) {
    auto request = parse(*json, limits);
    if (request.is_ok()) check_round_trip(*request, limits);
  }
  if (auto spec = kforge::model::parse_job_spec(*json); spec.is_ok()) {
    const Json canonical = kforge::model::to_json(*spec);
    auto again = kforge::model::parse_job_spec(canonical);
    if (!again.is_ok() || kforge::model::to_json(*again) != canonical) __builtin_trap();
  }
  return 0;
}
