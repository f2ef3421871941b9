#include "kforge/cuda_worker/job_result.h"

#include <algorithm>
#include <cmath>

namespace kforge::cuda_worker {
namespace {

Json to_json(const CorrectnessDetails& d) {
  Json per_trial = Json::array();
  for (const auto& t : d.per_trial) {
    per_trial.push_back({{"trial", t.trial},
                         {"passed", t.passed},
                         {"max_abs_error", t.max_abs_error},
                         {"max_rel_error", t.max_rel_error},
                         {"mismatch_count", t.mismatch_count},
                         {"message", t.message}});
  }
  Json first = nullptr;
  if (d.first_mismatch) {
    first = {{"trial", d.first_mismatch->trial},
             {"output", d.first_mismatch->output},
             {"index", d.first_mismatch->index},
             {"expected", d.first_mismatch->expected},
             {"actual", d.first_mismatch->actual}};
  }
  return {{"trials", d.trials},
          {"trials_passed", d.trials_passed},
          {"atol", d.atol ? Json(*d.atol) : Json(nullptr)},
          {"rtol", d.rtol ? Json(*d.rtol) : Json(nullptr)},
          {"max_abs_error", d.max_abs_error},
          {"max_rel_error", d.max_rel_error},
          {"mismatch_count", d.mismatch_count},
          {"numel", d.numel},
          {"first_mismatch", first},
          {"per_trial", per_trial}};
}

// kernel_time, kernels, idle_gap_ms, timing_flags, kernel_activity under `prefix`.
void add_activity(Json& out, const std::string& prefix, const ActivityResult& r) {
  const auto& a = r.activity;
  Json kernels = Json::array();
  for (const auto& op : a.kernels)
    kernels.push_back(op.to_json());
  Json flags = Json::array();
  for (const auto& f : r.flags)
    flags.push_back(f.to_json());
  out[prefix + "kernel_time"] = a.kernel_time_ms ? Json(*a.kernel_time_ms) : Json(nullptr);
  out[prefix + "kernels"] = std::move(kernels);
  out[prefix + "idle_gap_ms"] = a.idle_gap_ms ? Json(*a.idle_gap_ms) : Json(nullptr);
  out[prefix + "timing_flags"] = std::move(flags);
  out[prefix + "kernel_activity"] = a.to_json();
}

}  // namespace

void JobResult::fail(model::ErrorKind kind, const std::string& message) {
  if (!error_kind) error_kind = kind;
  if (kind == model::ErrorKind::kCompile) {
    if (!compilation_error) compilation_error = message;
  } else if (kind == model::ErrorKind::kMismatch) {
    if (!validation_error) validation_error = message;
  } else if (!runtime_error) {
    runtime_error = message;
  }
}

void JobResult::add_check(const std::string& name, bool passed, const std::string& message,
                          bool fatal) {
  for (auto& c : checks) {
    if (c.name != name) continue;
    if (c.passed && !passed) c = Check{name, passed, message, fatal};
    return;
  }
  checks.push_back(Check{name, passed, message, fatal});
}

void JobResult::warn(const std::string& message) {
  if (std::find(warnings.begin(), warnings.end(), message) == warnings.end()) {
    warnings.push_back(message);
  }
}

Json JobResult::to_json() const {
  Json checks_json = Json::array();
  Json honesty = Json::array();  // the failed checks, as judge/results.py lists them
  for (const auto& c : checks) {
    checks_json.push_back(
        {{"name", c.name}, {"passed", c.passed}, {"message", c.message}, {"fatal", c.fatal}});
    if (!c.passed)
      honesty.push_back({{"code", c.name}, {"message", c.message}, {"fatal", c.fatal}});
  }
  Json out = {
      {"compiled", compiled},
      {"correctness", correctness},
      {"runtime", runtime},
      {"runtime_stats", runtime_stats ? runtime_stats->to_json() : Json(nullptr)},
      {"ref_runtime", ref_runtime},
      {"ref_runtime_stats", ref_runtime_stats ? ref_runtime_stats->to_json() : Json(nullptr)},
      {"speedup", speedup ? Json(*speedup) : Json(nullptr)},
      {"speedup_ci", speedup_ci ? Json::array({speedup_ci->low, speedup_ci->high}) : Json(nullptr)},
      {"speedup_verdict", speedup_verdict.empty() ? Json(nullptr) : Json(speedup_verdict)},
      {"error_kind", error_kind ? Json(model::to_string(*error_kind)) : Json()},
      {"correctness_details",
       correctness_details ? cuda_worker::to_json(*correctness_details) : Json(nullptr)},
      {"checks", checks_json},
      {"honesty", honesty},
      {"warnings", warnings},
      {"metadata", metadata},
      {"phases_ms", phases.to_json()}};
  add_activity(out, "", activity);
  add_activity(out, "ref_", ref_activity);
  if (!device_metrics_raw.is_null()) out["device_metrics_raw"] = device_metrics_raw;
  if (compilation_error) out["compilation_error"] = *compilation_error;
  if (runtime_error) out["runtime_error"] = *runtime_error;
  if (validation_error) out["validation_error"] = *validation_error;
  return encode_non_finite(std::move(out));
}

Json encode_non_finite(Json value) {
  if (value.is_number_float()) {
    double v = value.get<double>();
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    return value;
  }
  if (value.is_object() || value.is_array()) {
    for (auto& item : value)
      item = encode_non_finite(std::move(item));
  }
  return value;
}

}  // namespace kforge::cuda_worker
