#include "kforge/model/job_spec.h"

#include "kforge/model/json_reader.h"
#include "kforge/model/parse.h"
#include "kforge/model/serialize.h"

namespace kforge::model {
namespace {

using reader::expect_object;
using reader::field_error;

constexpr std::string_view kResolved = "the server resolves every default into the job spec";

// The limits of a spec: a REST request's, but the supervisor's own timeout is not bounded
// by what a client may ask for.
RequestLimits spec_limits() {
  RequestLimits limits;
  limits.max_timeout_s = 1e9;
  limits.min_timeout_s = 0.0;
  return limits;
}

Status check_device_metrics(const Json& j) {
  if (j.is_null()) return Status::ok();
  const JsonPath p("device_metrics");
  KF_RETURN_IF_ERROR(expect_object(j, p));
  if (!j.value("ncu", Json()).is_string() || j["ncu"].get<std::string>().empty()) {
    return field_error(p.key("ncu"), "is required (the path of the ncu executable)");
  }
  const Json& sections = j.value("sections", Json());
  if (!sections.is_array() || sections.empty()) {
    return field_error(p.key("sections"), "must be a non-empty list of ncu section names");
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    if (!sections[i].is_string() || !is_identifier(sections[i].get<std::string>())) {
      return field_error(p.key("sections").index(i), "must be an ncu section name");
    }
  }
  return reader::read_number(j, "timeout_s", p, 1e-3, 1e9).status();
}

Status check_reference_reuse(const Json& j) {
  if (j.is_null()) return Status::ok();
  const JsonPath p("reference_reuse");
  KF_RETURN_IF_ERROR(expect_object(j, p));
  KF_ASSIGN_OR_RETURN(std::string dir, reader::read_string(j, "dir", p, true));
  KF_ASSIGN_OR_RETURN(std::string key, reader::read_string(j, "key", p, true));
  if (key.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return field_error(p.key("key"), "must be a lowercase hexadecimal digest");
  }
  return reader::read_string(j, "sha256", p, false).status();
}

}  // namespace

Json to_json(const JobSpec& s) {
  const JobRequest& r = s.request;
  Json j = {{"job_id", s.job_id},
            {"kind", to_string(r.kind)},
            {"kernel", to_json(r.kernel)},
            {"reference", r.reference ? to_json(*r.reference) : Json()},
            {"num_correct_trials", r.num_correct_trials},
            {"measure_performance", r.measure_performance},
            {"timing", to_json(r.timing)},
            {"atol", r.atol ? Json(*r.atol) : Json()},
            {"rtol", r.rtol ? Json(*r.rtol) : Json()},
            {"seed", r.seed.value_or(0)},
            {"device", s.device},
            {"timeout_s", r.timeout_s},
            {"scratch_dir", s.scratch_dir},
            {"cache_dir", s.cache_dir}};
  if (!s.device_metrics.is_null()) j["device_metrics"] = s.device_metrics;
  if (!s.reference_reuse.is_null()) j["reference_reuse"] = s.reference_reuse;
  return j;
}

StatusOr<JobSpec> parse_job_spec(const Json& j) {
  const JsonPath root;
  KF_RETURN_IF_ERROR(expect_object(j, root));
  KF_RETURN_IF_ERROR(
      reader::require_members(j, root,
                              {"job_id", "kind", "kernel", "num_correct_trials",
                               "measure_performance", "timing", "seed", "device", "timeout_s"},
                              kResolved));
  for (const char* key : {"reference", "atol", "rtol"}) {  // present, maybe null
    if (!j.contains(key)) {
      return field_error(root.key(key),
                         "is required (" + std::string(kResolved) + "; null is a value)");
    }
  }
  const RequestLimits limits = spec_limits();
  JobSpec spec;
  JobRequest& req = spec.request;
  KF_ASSIGN_OR_RETURN(spec.job_id, reader::read_string(j, "job_id", root, true));
  KF_ASSIGN_OR_RETURN(const std::string kind, reader::read_string(j, "kind", root, true));
  const auto job_kind = job_kind_from(kind);
  if (!job_kind) {
    return field_error(root.key("kind"),
                       "unknown value '" + kind + "' (expected one of: evaluate, compare)");
  }
  req.kind = *job_kind;
  KF_ASSIGN_OR_RETURN(
      req.kernel, parse_kernel_code(j["kernel"], root.key("kernel"), limits, InlineData::kKeep));
  if (const Json* ref = reader::member(j, "reference")) {
    KF_ASSIGN_OR_RETURN(KernelCode r,
                        parse_kernel_code(*ref, root.key("reference"), limits, InlineData::kKeep));
    req.reference = std::move(r);
  }
  if ((req.kind == JobKind::kCompare) != req.reference.has_value()) {
    return field_error(root.key("reference"), req.kind == JobKind::kCompare
                                                  ? "is required for a compare"
                                                  : "must be null for an evaluate");
  }
  KF_ASSIGN_OR_RETURN(
      auto trials, reader::read_int(j, "num_correct_trials", root, 1, limits.max_correct_trials));
  req.num_correct_trials = static_cast<int>(*trials);
  KF_ASSIGN_OR_RETURN(auto measure, reader::read_bool(j, "measure_performance", root));
  req.measure_performance = *measure;
  const JsonPath tp = root.key("timing");
  KF_RETURN_IF_ERROR(expect_object(j["timing"], tp));
  KF_RETURN_IF_ERROR(
      reader::require_members(j["timing"], tp,
                              {"max_trials", "min_trials", "warmup_calls", "warmup_ms", "budget_ms",
                               "rse_target", "cuda_graph", "l2_flush"},
                              kResolved));
  KF_ASSIGN_OR_RETURN(req.timing, parse_timing_object(j["timing"], tp, req.timing, limits));
  KF_ASSIGN_OR_RETURN(req.atol, reader::read_number(j, "atol", root, 0.0, 1e300));
  KF_ASSIGN_OR_RETURN(req.rtol, reader::read_number(j, "rtol", root, 0.0, 1e300));
  KF_ASSIGN_OR_RETURN(req.seed, reader::read_uint64(j, "seed", root));
  KF_ASSIGN_OR_RETURN(spec.device, reader::read_string(j, "device", root, true));
  if (spec.device != "cpu" && spec.device.rfind("cuda:", 0) != 0) {
    return field_error(root.key("device"), "must be 'cpu' or 'cuda:N', got '" + spec.device + "'");
  }
  req.device = spec.device;
  KF_ASSIGN_OR_RETURN(auto timeout,
                      reader::read_number(j, "timeout_s", root, 1e-3, limits.max_timeout_s));
  req.timeout_s = *timeout;
  KF_ASSIGN_OR_RETURN(spec.scratch_dir, reader::read_string(j, "scratch_dir", root, false));
  KF_ASSIGN_OR_RETURN(spec.cache_dir, reader::read_string(j, "cache_dir", root, false));
  spec.device_metrics = j.value("device_metrics", Json());
  KF_RETURN_IF_ERROR(check_device_metrics(spec.device_metrics));
  spec.reference_reuse = j.value("reference_reuse", Json());
  KF_RETURN_IF_ERROR(check_reference_reuse(spec.reference_reuse));
  KF_RETURN_IF_ERROR(check_request_consistency(req, "kernel", "reference"));
  return spec;
}

}  // namespace kforge::model
