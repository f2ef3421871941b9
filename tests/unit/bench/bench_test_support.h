// Helpers of the bench unit tests: the repository's kernel library, a health() answer with
// chosen devices, and job results as the worker writes them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kforge/common/json.h"

namespace kforge::testing {

inline std::filesystem::path kernel_library() {
  return std::filesystem::path(KFORGE_TEST_SOURCE_DIR) / "kernels";
}

// JobService::health() of an engine with these devices ("cpu", "cuda:0" = an H100).
inline Json health_with(const std::vector<std::string>& devices) {
  Json list = Json::array();
  for (const auto& name : devices) {
    Json facts = name == "cpu" ? Json{{"kind", "cpu"}}
                               : Json{{"kind", "gpu"}, {"name", "NVIDIA H100 80GB HBM3"}};
    list.push_back(Json{{"name", name}, {"facts", facts}});
  }
  return Json{{"status", "healthy"}, {"devices", list}};
}

// kernel_exec_result of a correct, timed kernel (mean `mean_ms`, median 0.9x of it).
inline Json timed_result(double mean_ms, double ref_mean_ms = 0) {
  Json r = {{"compiled", true},
            {"correctness", true},
            {"runtime_stats",
             {{"mean", mean_ms},
              {"median", 0.9 * mean_ms},
              {"std", 0.01},
              {"trials", 10},
              {"method", "cuda_event"}}},
            {"correctness_details", {{"max_abs_error", 1e-7}, {"max_rel_error", 2e-6}}}};
  if (ref_mean_ms > 0) {
    r["ref_runtime_stats"] = {{"mean", ref_mean_ms}, {"median", ref_mean_ms}, {"trials", 10}};
  }
  return r;
}

// kernel_exec_result of a kernel whose output is wrong.
inline Json wrong_result(const std::string& why) {
  return Json{{"compiled", true},
              {"correctness", false},
              {"error_kind", "mismatch"},
              {"validation_error", why},
              {"runtime_stats", Json::object()},
              {"correctness_details", {{"max_abs_error", 0.5}, {"max_rel_error", "Infinity"}}}};
}

}  // namespace kforge::testing
