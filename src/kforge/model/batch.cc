#include "kforge/model/batch.h"

#include <string>

#include "kforge/model/parse.h"

namespace kforge::model {
namespace {

constexpr std::string_view kCustom = "custom_kernel";

// A candidate's error from parse_compare_request, renamed to where the client wrote it:
// custom_kernel.source_code -> candidates[3].source_code.
Status in_batch_terms(const Status& status, size_t index) {
  const std::string& field = status.field_path();
  if (field.rfind(kCustom, 0) != 0) return status;
  std::string renamed = JsonPath("candidates").index(index).str() + field.substr(kCustom.size());
  std::string message = status.message();
  // check_request_consistency names the kernel's field in its message too.
  for (size_t at = message.find(kCustom); at != std::string::npos;
       at = message.find(kCustom, at + 1)) {
    message.replace(at, kCustom.size(), JsonPath("candidates").index(index).str());
  }
  return Status(status.code(), std::move(message), std::move(renamed));
}

}  // namespace

StatusOr<BatchRequest> parse_batch_request(const Json& body, const RequestLimits& limits) {
  if (!body.is_object()) {
    return invalid_argument("must be an object, got " + std::string(json_type_name(body)),
                            "<root>");
  }
  if (body.contains(kCustom)) {
    return invalid_argument(
        "a batch has no custom_kernel: put every candidate in 'candidates' (a list of kernels)",
        std::string(kCustom));
  }
  auto ref = body.find("ref_kernel");
  if (ref == body.end() || ref->is_null()) return invalid_argument("is required", "ref_kernel");
  auto candidates = body.find("candidates");
  if (candidates == body.end() || candidates->is_null()) {
    return invalid_argument("is required (a list of candidate kernels)", "candidates");
  }
  if (!candidates->is_array()) {
    return invalid_argument(
        "must be a list of kernels, got " + std::string(json_type_name(*candidates)), "candidates");
  }
  if (candidates->empty()) return invalid_argument("must hold at least one kernel", "candidates");
  if (candidates->size() > limits.max_batch_candidates) {
    return invalid_argument("holds " + std::to_string(candidates->size()) +
                                " kernels; a batch takes at most " +
                                std::to_string(limits.max_batch_candidates),
                            "candidates");
  }
  Json one = body;
  one.erase("candidates");
  BatchRequest batch;
  batch.jobs.reserve(candidates->size());
  for (size_t i = 0; i < candidates->size(); ++i) {
    one[std::string(kCustom)] = (*candidates)[i];
    auto job = parse_compare_request(one, limits);
    if (!job.is_ok()) return in_batch_terms(job.status(), i);
    batch.jobs.push_back(std::move(job).value());
  }
  return batch;
}

StatusOr<std::optional<BatchMembership>> parse_batch_membership(const Json& stored) {
  auto it = stored.find("batch");
  if (it == stored.end() || it->is_null()) return std::optional<BatchMembership>();
  const Json& b = *it;
  if (!b.is_object() || !b.contains("id") || !b["id"].is_string() || !b.contains("index") ||
      !b["index"].is_number_integer() || !b.contains("size") || !b["size"].is_number_integer()) {
    return invalid_argument("must be {id, index, size}", "batch");
  }
  BatchMembership m;
  m.id = b["id"].get<std::string>();
  m.index = b["index"].get<int>();
  m.size = b["size"].get<int>();
  if (m.id.empty() || m.index < 0 || m.size <= m.index) {
    return invalid_argument("must be {id, index, size} with 0 <= index < size", "batch");
  }
  return std::optional<BatchMembership>(std::move(m));
}

}  // namespace kforge::model
