#include "kforge/frontends/mcp/kernel_tool_results.h"

#include <fmt/format.h>

#include "kforge/jobs/job_view.h"

namespace kforge::frontends::mcp {
namespace {

std::string text_of(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "0.006123 ms (cpu_wall_clock)" from a runtime_stats object, or empty.
std::string describe_timing(const Json& stats) {
  if (!stats.is_object() || !stats.contains("median") || !stats["median"].is_number()) return {};
  std::string out = fmt::format("median {:.4g} ms", stats["median"].get<double>());
  if (auto method = text_of(stats, "method"); !method.empty()) out += " (" + method + ")";
  return out;
}

std::string correctness_trials(const Json& result) {
  auto details = result.find("correctness_details");
  if (details == result.end() || !details->is_object()) return {};
  if (!details->contains("trials") || !details->contains("trials_passed")) return {};
  return fmt::format(" ({}/{} trials)", (*details)["trials_passed"].dump(),
                     (*details)["trials"].dump());
}

std::string verdict(const Json& view, const Json& r) {
  const std::string where =
      " (job " + text_of(view, "job_id") + " on " + text_of(view, "device") + ")";
  std::string kind = text_of(r, "error_kind");
  std::string suffix = kind.empty() ? std::string() : " [" + kind + "]";
  if (!r.value("compiled", false)) {
    std::string why = text_of(r, "compilation_error");
    if (why.empty()) why = text_of(r, "runtime_error");
    return "The kernel did not compile" + where + suffix + ": " + why;
  }
  if (!r.value("correctness", false)) {
    std::string why = text_of(r, "validation_error");
    if (why.empty()) why = text_of(r, "runtime_error");
    return "The kernel is not correct" + where + suffix + ": " + why;
  }
  std::string out = "Correct" + correctness_trials(r) + where;
  std::string timing = describe_timing(r.value("runtime_stats", Json()));
  if (timing.empty()) return out + "; not timed";
  out += "; runtime " + timing;
  std::string ref = describe_timing(view.value("ref_runtime_stats", Json()));
  if (!ref.empty()) out += "; reference " + ref;
  if (auto s = view.find("speedup"); s != view.end() && s->is_number()) {
    out += fmt::format("; speedup {:.3g}x", s->get<double>());
  }
  return out;
}

}  // namespace

bool job_failed(const Json& view) {
  if (text_of(view, "status") != "success") return true;
  auto r = view.find("kernel_exec_result");
  if (r == view.end() || !r->is_object()) return true;
  return !r->value("compiled", false) || !r->value("correctness", false);
}

std::string summarize_job(const Json& view) {
  const std::string id = text_of(view, "job_id");
  const std::string status = text_of(view, "status");
  if (status == "queued" || status == "running") {
    return "Job " + id + " is " + status + " on " + text_of(view, "device") +
           "; call get_job_status again for the result";
  }
  if (status == "failed")
    return "kforge could not evaluate job " + id + ": " + text_of(view, "error");
  if (status == "cancelled") return "Job " + id + " was cancelled: " + text_of(view, "error");
  auto r = view.find("kernel_exec_result");
  if (r == view.end() || !r->is_object()) return "Job " + id + " finished without a result";
  return verdict(view, *r);
}

ToolResult finished_job_result(const jobs::JobRecord& job,
                               const std::vector<std::string>& warnings) {
  Json view = jobs::job_response(job);
  if (!warnings.empty()) view["warnings"] = warnings;
  std::string summary = summarize_job(view);
  bool failed = job_failed(view);
  return ToolResult::structured_value(std::move(view), std::move(summary), failed);
}

ToolResult job_status_result(const jobs::JobRecord& job) {
  Json view = jobs::job_response(job);
  std::string summary = summarize_job(view);
  return ToolResult::structured_value(std::move(view), std::move(summary));
}

}  // namespace kforge::frontends::mcp
