#include "kforge/jobs/exec_result_view.h"

#include <string>

namespace kforge::jobs {
namespace {

bool is_measured(const Json& stats) {
  if (!stats.is_object()) return false;
  auto mean = stats.find("mean");
  return mean != stats.end() && mean->is_number();
}

// The stats object with every RuntimeStats field present (0.0 where a worker left one out).
Json runtime_stats_of(const Json& stats) {
  Json out = stats;
  for (const char* key : kRuntimeStatsFields) {
    auto it = out.find(key);
    if (it == out.end() || !it->is_number()) out[key] = 0.0;
  }
  return out;
}

std::string text_of(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Why a kernel that compiled is not correct, for `validation_error`.
std::string failure_reason(const Json& r) {
  for (const char* key : {"runtime_error", "compilation_error"}) {
    if (std::string why = text_of(r, key); !why.empty()) return why;
  }
  std::string kind = text_of(r, "error_kind");
  return kind.empty() ? "the kernel did not pass validation"
                      : "the kernel did not pass validation (" + kind + ")";
}

void set_error_fields(Json& r) {
  const bool compiled = r.value("compiled", false);
  const bool correct = r.value("correctness", false);
  if (!compiled) {
    if (text_of(r, "compilation_error").empty()) {
      std::string why = text_of(r, "runtime_error");
      r["compilation_error"] = why.empty() ? "the kernel did not compile" : why;
    }
    return;
  }
  if (!correct && text_of(r, "validation_error").empty()) r["validation_error"] = failure_reason(r);
  // A compiled candidate has no compilation error of its own: one here is the reference's,
  // and it is in validation_error now (the old server never set both).
  r.erase("compilation_error");
}

void set_gpu_id(Json& r) {
  auto meta = r.find("metadata");
  if (meta == r.end() || !meta->is_object()) {
    r["metadata"] = Json::object();
    meta = r.find("metadata");
  }
  auto id = meta->find("gpu_id");
  if (id == meta->end() || !id->is_number_integer()) (*meta)["gpu_id"] = -1;
}

}  // namespace

Json zero_runtime_stats() {
  Json out = Json::object();
  for (const char* key : kRuntimeStatsFields)
    out[key] = 0.0;
  return out;
}

Json exec_result_view(const Json& result, bool is_compare) {
  if (!result.is_object()) return Json::object();
  Json r = result;
  const Json stats = r.value("runtime_stats", Json());
  if (is_measured(stats)) {
    r["runtime_stats"] = runtime_stats_of(stats);
    r["runtime"] = stats["mean"];
    r["runtime_median"] = r["runtime_stats"]["median"];
  } else {
    r["runtime"] = 0.0;
    r.erase("runtime_stats");
    r.erase("runtime_median");
  }
  const Json ref_stats = r.value("ref_runtime_stats", Json());
  if (is_measured(ref_stats)) {
    r["ref_runtime_stats"] = runtime_stats_of(ref_stats);
  } else {
    r.erase("ref_runtime_stats");
  }
  if (is_compare) {
    r["ref_runtime"] =
        r.contains("ref_runtime_stats") ? r["ref_runtime_stats"] : zero_runtime_stats();
  } else {
    r.erase("ref_runtime");
  }
  if (auto s = r.find("speedup"); s != r.end() && !s->is_number()) r.erase(s);
  if (!r.contains("speedup")) {
    r.erase("speedup_ci");
    r.erase("speedup_verdict");
  }
  set_error_fields(r);
  set_gpu_id(r);
  return r;
}

}  // namespace kforge::jobs
