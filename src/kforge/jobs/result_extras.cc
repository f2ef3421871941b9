#include "kforge/jobs/result_extras.h"

#include <optional>
#include <string_view>

#include "kforge/jobs/ncu_report.h"
#include "kforge/jobs/roofline.h"

namespace kforge::jobs {
namespace {

std::optional<double> median_of(const Json& result, const char* stats_key) {
  auto it = result.find(stats_key);
  if (it == result.end() || !it->is_object()) return std::nullopt;
  auto m = it->find("median");
  if (m == it->end() || !m->is_number()) return std::nullopt;
  return m->get<double>();
}

// True when the judge's clock contradicted the candidate's claimed timing.
bool timing_contradicted(const Json& result) {
  auto checks = result.find("checks");
  if (checks == result.end() || !checks->is_array()) return false;
  for (const auto& c : *checks) {
    if (c.is_object() && c.value("name", "") == "timing_consistent_with_judge_clock" &&
        !c.value("passed", true)) {
      return true;
    }
  }
  return false;
}

Json roofline_for(const Json& result, const ResultExtrasContext& c, const model::KernelCode& k,
                  const model::KernelCode* other, const char* stats_key) {
  if (!c.on_gpu) return roofline_not_measured("not measured on cpu");
  if (std::string_view(stats_key) == "runtime_stats" && timing_contradicted(result)) {
    return roofline_not_measured(
        "the kernel's timing failed the judge's clock check "
        "(timing_consistent_with_judge_clock): no roofline from it");
  }
  if (!c.peaks.is_object()) {
    return roofline_not_measured("the device's peaks are not measured: " + c.peaks_error);
  }
  const Json inputs = result.contains("metadata") && result["metadata"].is_object()
                          ? result["metadata"].value("inputs", Json())
                          : Json();
  return roofline(work_of(k, other, inputs), median_of(result, stats_key), c.peaks);
}

std::string missing_metrics_reason(const Json& result, const ResultExtrasContext& c) {
  if (!c.device_metrics_unavailable.empty()) return c.device_metrics_unavailable;
  if (!c.on_gpu) return "device metrics need a GPU; this job ran on the cpu device";
  const auto correct = result.find("correctness");
  const bool timed = correct != result.end() && correct->is_boolean() && correct->get<bool>() &&
                     result.contains("runtime_stats") && result["runtime_stats"].is_object();
  if (!timed) {
    return "the kernel was not timed (it did not compile, is not correct, or was not asked to "
           "be timed), so it was not profiled";
  }
  return "the worker returned no Nsight Compute output";
}

void add_device_metrics(Json& result, const ResultExtrasContext& c) {
  Json raw = result.value("device_metrics_raw", Json());
  result.erase("device_metrics_raw");
  if (!c.device_metrics) return;
  if (!result.contains("metadata") || !result["metadata"].is_object()) {
    result["metadata"] = Json::object();
  }
  Json metrics = Json::object();
  if (!raw.is_object() || raw.empty()) {
    metrics["error"] = missing_metrics_reason(result, c);
  } else {
    const bool compare = c.request->reference.has_value();
    // The seed server's names: an evaluate's kernel is "original"; a compare's reference is
    // "original" and its candidate "custom".
    const std::pair<const char*, const char*> roles[] = {
        {"candidate", compare ? "custom_device_metrics" : "original_device_metrics"},
        {"reference", compare ? "original_device_metrics" : nullptr}};
    std::string errors;
    for (const auto& [role, key] : roles) {
      if (key == nullptr || !raw.contains(role) || !raw[role].is_object()) continue;
      Json m = device_metrics_of_run(raw[role]);
      if (m.contains("error")) {
        errors +=
            (errors.empty() ? "" : "; ") + std::string(role) + ": " + m["error"].get<std::string>();
      }
      metrics[key] = std::move(m);
    }
    if (!errors.empty()) metrics["error"] = errors;
    if (metrics.empty()) metrics["error"] = missing_metrics_reason(result, c);
  }
  if (metrics.contains("error")) {
    Json& warnings = result["warnings"];
    if (!warnings.is_array()) warnings = Json::array();
    warnings.push_back("device metrics: " + metrics["error"].get<std::string>());
  }
  result["metadata"]["device_metrics"] = std::move(metrics);
}

}  // namespace

void add_result_extras(Json& result, const ResultExtrasContext& c) {
  if (!result.is_object() || c.request == nullptr) return;
  const model::JobRequest& r = *c.request;
  const model::KernelCode* ref = r.reference ? &*r.reference : nullptr;
  result["roofline"] = roofline_for(result, c, r.kernel, ref, "runtime_stats");
  result["ref_roofline"] = ref != nullptr
                               ? roofline_for(result, c, *ref, &r.kernel, "ref_runtime_stats")
                               : roofline_not_measured("no reference kernel");
  add_device_metrics(result, c);
}

}  // namespace kforge::jobs
