#include "kforge/frontends/mcp/kernel_tool_results.h"

#include <fmt/format.h>

#include <charconv>

#include "kforge/jobs/job_view.h"

namespace kforge::frontends::mcp {
namespace {

std::string text_of(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "mean 0.006123 ms, median 0.0061 ms (cpu_wall_clock)" from a runtime_stats object, or empty.
std::string describe_timing(const Json& stats) {
  if (!stats.is_object() || !stats.contains("mean") || !stats["mean"].is_number()) return {};
  std::string out = fmt::format("mean {:.4g} ms", stats["mean"].get<double>());
  if (stats.contains("median") && stats["median"].is_number()) {
    out += fmt::format(", median {:.4g} ms", stats["median"].get<double>());
  }
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
    return "The kernel did not compile" + where + suffix + ": " + text_of(r, "compilation_error");
  }
  if (!r.value("correctness", false)) {
    return "The kernel is not correct" + where + suffix + ": " + text_of(r, "validation_error");
  }
  std::string out = "Correct" + correctness_trials(r) + where;
  std::string timing = describe_timing(r.value("runtime_stats", Json()));
  if (timing.empty()) return out + "; not timed";
  out += "; runtime " + timing;
  std::string ref = describe_timing(view.value("ref_runtime_stats", Json()));
  if (!ref.empty()) out += "; reference " + ref;
  if (auto s = view.find("speedup"); s != view.end() && s->is_number()) {
    out += fmt::format("; speedup {:.3g}x (reference median / kernel median", s->get<double>());
    const Json ci = view.value("speedup_ci", Json());
    if (ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number()) {
      out += fmt::format(", 95% interval {:.3g}-{:.3g}x", ci[0].get<double>(), ci[1].get<double>());
    }
    const std::string said = text_of(view, "speedup_verdict");
    if (!said.empty()) out += ": " + said;
    out += ")";
  }
  return out;
}

double megabytes(const Json& facts, const char* key) {
  auto it = facts.find(key);
  return it != facts.end() && it->is_number() ? it->get<double>() / (1024.0 * 1024.0) : 0.0;
}

}  // namespace

bool job_failed(const Json& view) {
  if (text_of(view, "state") != "success") return true;
  auto r = view.find("kernel_exec_result");
  if (r == view.end() || !r->is_object()) return true;
  return !r->value("compiled", false) || !r->value("correctness", false);
}

std::string summarize_job(const Json& view) {
  const std::string id = text_of(view, "job_id");
  const std::string state = text_of(view, "state");
  if (state == "queued" || state == "running") {
    return "Job " + id + " is " + text_of(view, "status") + " on " + text_of(view, "device") +
           "; call get_job_status again for the result";
  }
  if (state == "failed")
    return "kforge could not evaluate job " + id + ": " + text_of(view, "error");
  if (state == "cancelled") return "Job " + id + " was cancelled: " + text_of(view, "error");
  auto r = view.find("kernel_exec_result");
  if (r == view.end() || !r->is_object() || r->empty()) {
    return "Job " + id + " finished without a result";
  }
  return verdict(view, *r);
}

ToolResult finished_job_result(const model::JobRecord& job,
                               const std::vector<std::string>& warnings, bool validate) {
  Json view = jobs::job_result_view(job);
  if (!warnings.empty()) view["warnings"] = warnings;
  if (validate) {
    const Json& r = view["kernel_exec_result"];
    view["compiled"] = r.value("compiled", false);
    view["validated"] = r.value("correctness", false);
    for (const char* key : {"compilation_error", "validation_error", "compilation_time"}) {
      auto it = r.find(key);
      view[key] = it != r.end() ? *it : Json();
    }
    view["metadata"] = r.value("metadata", Json::object());
  }
  std::string summary = summarize_job(view);
  return ToolResult::structured_value(std::move(view), std::move(summary));
}

ToolResult job_status_result(const model::JobRecord& job) {
  Json view = jobs::job_status_view(job);
  std::string summary = summarize_job(view);
  return ToolResult::structured_value(std::move(view), std::move(summary));
}

ToolResult job_not_found_result(const std::string& job_id) {
  const std::string why = "Job " + job_id +
                          " not found (job ids come from evaluate_kernel, compare_kernels or "
                          "validate_kernel; finished jobs are removed after the server's "
                          "retention period)";
  Json view = {{"job_id", job_id}, {"status", "not_found"}, {"error", why}};
  return ToolResult::structured_value(std::move(view), why);
}

ToolResult server_stats_result(const Json& stats, const Json& health) {
  Json out = stats;
  Json gpu_info = Json::array();
  for (const auto& d : health.value("devices", Json::array())) {
    const Json facts = d.value("facts", Json::object());
    if (facts.value("kind", "") != "gpu") continue;
    const std::string name = d.value("name", "");
    int index = 0;
    if (name.starts_with("cuda:")) {
      const auto [end, ec] = std::from_chars(name.data() + 5, name.data() + name.size(), index);
      if (ec != std::errc() || end != name.data() + name.size()) index = 0;
    }
    // The server process itself holds no GPU memory: jobs run in their own processes.
    gpu_info.push_back(Json{{"device_id", index},
                            {"device_name", facts.value("name", name)},
                            {"memory_allocated_mb", 0.0},
                            {"memory_reserved_mb", 0.0},
                            {"memory_total_mb", megabytes(facts, "total_memory_bytes")}});
  }
  out["status"] = health.value("status", "healthy");
  out["gpu_available"] = !gpu_info.empty();
  out["gpu_count"] = gpu_info.size();
  out["gpu_info"] = std::move(gpu_info);
  if (!out.contains("job_stats")) out["job_stats"] = Json::object();
  std::string summary = fmt::format("{} job(s) queued; devices:", stats.value("queue_depth", 0));
  for (const auto& d : stats.value("devices", Json::array())) {
    summary += " " + d.value("name", std::string("?"));
  }
  return ToolResult::structured_value(std::move(out), std::move(summary));
}

}  // namespace kforge::frontends::mcp
