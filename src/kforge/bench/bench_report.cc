#include "kforge/bench/bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "kforge/bench/json_number.h"
#include "kforge/common/iso8601.h"
#include "kforge/model/speedup.h"

namespace kforge::bench {
namespace {

constexpr size_t kMaxErrorChars = 4000;

// Worker errors keep the end of a traceback, which says what went wrong.
std::string clip(std::string text) {
  if (text.size() <= kMaxErrorChars) return text;
  return "..." + text.substr(text.size() - kMaxErrorChars);
}

// What one job measured, read from its outcome.
struct Measured {
  bool correct = false;
  std::optional<bool> compiled;  // unset when the job produced no result
  std::string error;
  std::string error_kind;
  Json stats;      // runtime_stats of the kernel under test
  Json ref_stats;  // ref_runtime_stats (compares)
  Json max_abs_error;
  Json max_rel_error;
};

Measured measure(const JobOutcome& o) {
  Measured m;
  if (!o.submitted) {
    m.error = "not run";
    return m;
  }
  if (o.state != "success") {
    m.error_kind = o.state.empty() ? "unfinished" : o.state;
    m.error = "the job " + (o.state.empty() ? std::string("did not finish") : o.state) +
              (o.error.empty() ? "" : ": " + o.error);
    return m;
  }
  const Json& r = o.result;
  if (r.is_object()) m.compiled = r.value("compiled", false);
  m.error_kind =
      r.value("error_kind", Json()).is_string() ? r["error_kind"].get<std::string>() : "";
  m.correct = r.value("compiled", false) && r.value("correctness", false);
  if (!m.correct) {
    for (const char* key : {"compilation_error", "validation_error", "runtime_error"}) {
      if (auto it = r.find(key);
          it != r.end() && it->is_string() && !it->get<std::string>().empty()) {
        m.error = clip(it->get<std::string>());
        break;
      }
    }
    if (m.error.empty()) m.error = "incorrect (no reason given)";
  }
  if (auto it = r.find("runtime_stats"); it != r.end() && json_number(*it, "mean")) m.stats = *it;
  if (auto it = r.find("ref_runtime_stats"); it != r.end() && json_number(*it, "mean")) {
    m.ref_stats = *it;
  }
  if (auto it = r.find("correctness_details"); it != r.end() && it->is_object()) {
    m.max_abs_error = it->value("max_abs_error", Json());
    m.max_rel_error = it->value("max_rel_error", Json());
  }
  return m;
}

// A worse (larger) error of the two; "Infinity" strings count as infinite.
Json max_error(const Json& a, const Json& b) {
  auto value = [](const Json& j) {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) return HUGE_VAL;
    return -1.0;
  };
  return value(b) > value(a) ? b : a;
}

// What moves between runs beyond their own spread (model/speedup.h): cpu or GPU.
double systematic(const BenchPlan& plan) {
  return plan.interpreter ? model::kCpuSystematic : model::kGpuSystematic;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    s += x;
  return s / static_cast<double>(v.size());
}

// One table row (torch, torch.compile or a version) being assembled.
struct Row {
  Json json;
  std::vector<double> means;
  std::vector<double> medians;
  std::vector<model::TimeEstimate> estimates;  // of the means, per size
  std::optional<model::TimeEstimate> final;    // of Final (the mean of the means)
  bool all_timed = true;
};

// Where a speedup's interval and verdict go: {"speedup_ci": [low, high], "speedup_verdict"}.
void add_interval(Json& out, const model::TimeEstimate& baseline, const model::TimeEstimate& own,
                  double systematic) {
  const model::SpeedupInterval ci = model::ratio_interval(baseline, own, systematic);
  out["speedup_ci"] = ci.to_json();
  out["speedup_verdict"] = model::speedup_verdict(ci);
}

void add_size(Row& row, const std::string& size, const Measured& m, const JobOutcome& o,
              int64_t bytes, int64_t flops) {
  Json cell = {{"job_id", o.job_id.empty() ? Json() : Json(o.job_id)}, {"correct", m.correct}};
  if (m.compiled) cell["compiled"] = *m.compiled;
  if (!m.error.empty()) cell["error"] = m.error;
  if (!m.error_kind.empty()) cell["error_kind"] = m.error_kind;
  if (!m.stats.is_null()) {
    const double mean = m.stats["mean"].get<double>();
    cell["mean_ms"] = mean;
    cell["median_ms"] = m.stats.value("median", mean);
    cell["std_ms"] = m.stats.value("std", 0.0);
    cell["trials"] = m.stats.value("trials", 0);
    cell["method"] = m.stats.value("method", "");
    if (mean > 0) {
      cell["gbs"] = static_cast<double>(bytes) / (mean * 1e-3) / 1e9;
      cell["tflops"] = static_cast<double>(flops) / (mean * 1e-3) / 1e12;
    }
    row.means.push_back(mean);
    row.medians.push_back(cell["median_ms"].get<double>());
    row.estimates.push_back(model::TimeEstimate::of_mean(mean, cell["std_ms"].get<double>(),
                                                         cell["trials"].get<int64_t>()));
  } else {
    row.all_timed = false;
  }
  if (!m.max_abs_error.is_null()) cell["max_abs_error"] = m.max_abs_error;
  if (!m.max_rel_error.is_null()) cell["max_rel_error"] = m.max_rel_error;
  row.json["sizes"][size] = std::move(cell);
}

void close_row(Row& row) {
  row.json["final_ms"] = row.all_timed && !row.means.empty() ? Json(mean_of(row.means)) : Json();
  if (row.all_timed) row.final = model::arithmetic_mean(row.estimates);
  row.json["final_median_ms"] =
      row.all_timed && !row.medians.empty() ? Json(mean_of(row.medians)) : Json();
}

Json peak_report(const BenchPlan& plan, const std::vector<JobOutcome>& outcomes) {
  Json peaks = {{"copy", nullptr}, {"matmul", Json::object()}};
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const PlannedJob& job = plan.jobs[i];
    if (job.role != JobRole::kCopyPeak && job.role != JobRole::kMatmulPeak) continue;
    const Measured m = measure(outcomes[i]);
    Json p = {{"job_id", outcomes[i].job_id}};
    if (m.stats.is_null()) {
      p["error"] = m.error.empty() ? "not timed" : m.error;
    } else {
      const double seconds = m.stats["mean"].get<double>() * 1e-3;
      p["mean_ms"] = m.stats["mean"];
      if (job.role == JobRole::kCopyPeak) {
        p["bytes"] = job.bytes;
        p["gbs"] = static_cast<double>(job.bytes) / seconds / 1e9;
      } else {
        p["flops"] = job.flops;
        p["tflops"] = static_cast<double>(job.flops) / seconds / 1e12;
      }
    }
    if (job.role == JobRole::kCopyPeak) {
      peaks["copy"] = std::move(p);
    } else {
      peaks["matmul"][job.dtype] = std::move(p);
    }
  }
  return peaks;
}

// Phase 4: the correct version with the lowest Final, the versions it cannot be told apart
// from (`tied_with`), and how it compares at the large size.
Json best_of(const BenchPlan& plan, const OpPlan& op, const Json& rows,
             const std::map<std::string, Row>& by_name, const Json& peaks) {
  const Json* best = nullptr;
  const Json* runner_up = nullptr;
  int correct = 0;
  for (const auto& row : rows) {
    if (row["kind"] != "version" || !row["correct"].get<bool>()) continue;
    ++correct;
    if (row["final_ms"].is_null()) continue;
    const double final_ms = row["final_ms"].get<double>();
    if (best == nullptr || final_ms < (*best)["final_ms"].get<double>()) {
      runner_up = best;
      best = &row;
    } else if (runner_up == nullptr || final_ms < (*runner_up)["final_ms"].get<double>()) {
      runner_up = &row;
    }
  }
  Json out = {{"correct_versions", correct}, {"versions", op.versions.size()}};
  if (best == nullptr) {
    out["kernel"] = nullptr;
    out["reason"] = correct == 0 ? "no version is correct at every size"
                                 : "no correct version was timed at every size";
    return out;
  }
  out["kernel"] = (*best)["kernel"];
  out["final_ms"] = (*best)["final_ms"];
  out["speedup"] = (*best)["speedup"];
  out["speedup_ci"] = best->value("speedup_ci", Json());
  out["speedup_verdict"] = best->value("speedup_verdict", Json());
  // A tie is reported as a tie: every correct version whose Final cannot be told from the
  // best's (the interval of their ratio covers 1).
  Json tied = Json::array();
  const auto& best_final = by_name.at((*best)["kernel"].get<std::string>()).final;
  for (const auto& row : rows) {
    if (&row == best || row["kind"] != "version" || !row["correct"].get<bool>()) continue;
    const auto& final = by_name.at(row["kernel"].get<std::string>()).final;
    if (best_final && final &&
        model::ratio_interval(*final, *best_final, systematic(plan)).covers(1.0)) {
      tied.push_back(row["kernel"]);
    }
  }
  out["tied_with"] = std::move(tied);
  out["speedup_vs_compile"] = nullptr;
  for (const auto& row : rows) {
    if (row["kernel"] == "torch.compile" && row["final_ms"].is_number()) {
      out["speedup_vs_compile"] = row["final_ms"].get<double>() / (*best)["final_ms"].get<double>();
    }
  }
  out["runner_up"] = runner_up == nullptr ? Json()
                                          : Json{{"kernel", (*runner_up)["kernel"]},
                                                 {"final_ms", (*runner_up)["final_ms"]}};

  Json large = {{"peak_kind", op.manifest.compute_bound() ? "matmul" : "copy_bandwidth"},
                {"percent_of_peak", nullptr}};
  const Json& cell = (*best)["sizes"].value("large", Json());
  const Json peak =
      op.manifest.compute_bound() ? peaks["matmul"].value(op.dtype, Json()) : peaks["copy"];
  const char* unit = op.manifest.compute_bound() ? "tflops" : "gbs";
  if (cell.is_null()) {
    large["reason"] = "the large size was not run";
  } else if (!cell.contains(unit)) {
    large["reason"] = "the large size was not timed";
  } else if (!plan.options.peaks) {
    large["achieved"] = cell[unit];
    large["reason"] = "peaks were not measured (--no-peaks)";
  } else if (peak.is_null() || !peak.contains(unit)) {
    large["achieved"] = cell[unit];
    large["reason"] = peak.is_object() && peak.contains("error")
                          ? "the peak probe failed: " + peak["error"].get<std::string>()
                          : std::string("the peak probe did not run");
  } else {
    large["achieved"] = cell[unit];
    large["peak"] = peak[unit];
    large["percent_of_peak"] = 100.0 * cell[unit].get<double>() / peak[unit].get<double>();
  }
  large["unit"] = op.manifest.compute_bound() ? "TFLOP/s" : "GB/s";
  out["large"] = std::move(large);
  return out;
}

Json op_report(const BenchPlan& plan, int index, const std::vector<JobOutcome>& outcomes,
               const Json& peaks) {
  const OpPlan& op = plan.ops[index];
  const OpManifest& m = op.manifest;
  const std::string& profile = plan.profile;
  const auto tol = m.tolerance.at(op.dtype);
  Json sizes = Json::object();
  std::map<std::string, std::pair<int64_t, int64_t>> cost;  // size -> bytes, flops
  for (const auto& size : plan.options.sizes) {
    const SizeSpec& s = m.sizes.at(profile).at(size);
    const int64_t bytes = s.elements_moved * dtype_bytes(op.dtype);
    cost[size] = {bytes, s.flops};
    sizes[size] =
        Json{{"label", s.label}, {"shapes", s.shapes}, {"bytes", bytes}, {"flops", s.flops}};
  }

  std::map<std::string, Row> rows;  // by kernel name
  std::vector<std::string> order = {"torch"};
  if (plan.options.torch_compile) order.emplace_back("torch.compile");
  for (const auto& name : order) {
    rows[name].json = {{"kernel", name}, {"kind", "baseline"}, {"correct", true}};
  }
  for (const auto& v : op.versions) {
    order.push_back(v.name);
    Row& row = rows[v.name];
    auto retries = op.retries.find(v.name);
    const Json tries = op.regeneration.value(v.name, Json::array());
    row.json = {{"kernel", v.name},
                {"kind", "version"},
                {"origin", v.origin},
                {"summary", Json{{"en", v.summary_en}, {"ko", v.summary_ko}}},
                // Regenerations: the agent's own count (retries.json, the request) and this
                // bench's tries.
                {"retries", (retries == op.retries.end() ? 0 : retries->second) +
                                static_cast<int>(tries.size())},
                {"correct", v.load_error.empty()},
                {"max_abs_error", nullptr},
                {"max_rel_error", nullptr}};
    if (!tries.empty()) row.json["regeneration"] = tries;
    if (!v.load_error.empty()) {
      row.json["error"] = "could not be loaded: " + v.load_error;
      row.json["error_kind"] = "not_loaded";
      row.all_timed = false;
    }
  }
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const PlannedJob& job = plan.jobs[i];
    if (job.op != index) continue;
    const Measured measured = measure(outcomes[i]);
    const std::string name = job.role == JobRole::kVersion ? job.version
                             : job.role == JobRole::kTorch ? "torch"
                                                           : "torch.compile";
    Row& row = rows[name];
    add_size(row, job.size, measured, outcomes[i], cost[job.size].first, cost[job.size].second);
    if (!measured.correct) {
      row.json["correct"] = false;
      if (!row.json.contains("error")) {
        row.json["error"] = job.size + ": " + measured.error;
        row.json["error_kind"] = measured.error_kind;
      }
    }
    if (job.role == JobRole::kVersion) {
      row.json["max_abs_error"] = max_error(row.json["max_abs_error"], measured.max_abs_error);
      row.json["max_rel_error"] = max_error(row.json["max_rel_error"], measured.max_rel_error);
    }
  }
  for (auto& [name, row] : rows) {
    if (!row.json.contains("sizes")) row.json["sizes"] = Json::object();
    close_row(row);
  }
  // Speedups against the torch row, with their intervals: per size (means) and final.
  const Json& torch = rows["torch"].json;
  const Row& torch_row = rows["torch"];
  Json table = Json::array();
  for (const auto& name : order) {
    Json& row = rows[name].json;
    for (auto& [size, cell] : row["sizes"].items()) {
      const Json& t = torch["sizes"].value(size, Json());
      if (cell.contains("mean_ms") && t.is_object() && t.contains("mean_ms") &&
          cell["mean_ms"].get<double>() > 0) {
        cell["speedup"] = t["mean_ms"].get<double>() / cell["mean_ms"].get<double>();
        const auto baseline = model::TimeEstimate::from_json(t, "mean_ms");
        const auto own = model::TimeEstimate::from_json(cell, "mean_ms");
        if (name != "torch" && baseline && own)
          add_interval(cell, *baseline, *own, systematic(plan));
      }
    }
    row["speedup"] = row["final_ms"].is_number() && torch["final_ms"].is_number()
                         ? Json(torch["final_ms"].get<double>() / row["final_ms"].get<double>())
                         : Json();
    if (name != "torch" && rows[name].final && torch_row.final) {
      add_interval(row, *torch_row.final, *rows[name].final, systematic(plan));
    }
    table.push_back(row);
  }
  Json out = {{"op", m.op},
              {"title", m.title},
              {"dtype", op.dtype},
              {"kernels", op.kernels_origin},
              {"bound", m.phase1.value("bound", "")},
              {"reference", m.reference},
              {"phase1", m.phase1},
              {"tolerance", Json{{"atol", tol.atol}, {"rtol", tol.rtol}}},
              {"sizes", sizes},
              {"tests", op.tests.to_json()},
              {"rows", table}};
  out["best"] = best_of(plan, op, table, rows, peaks);
  return out;
}

}  // namespace

int64_t dtype_bytes(const std::string& dtype) {
  return dtype == "float32" ? 4 : 2;
}

std::optional<VersionFailure> version_failure(const BenchPlan& plan,
                                              const std::vector<JobOutcome>& outcomes, int op,
                                              const std::string& version) {
  const OpPlan& p = plan.ops.at(op);
  for (const auto& v : p.versions) {
    if (v.name == version && !v.load_error.empty()) {
      return VersionFailure{"not_loaded", "could not be loaded: " + v.load_error};
    }
  }
  std::optional<VersionFailure> failure;
  for (size_t i = 0; i < plan.jobs.size() && i < outcomes.size(); ++i) {
    const PlannedJob& job = plan.jobs[i];
    if (job.role != JobRole::kVersion || job.op != op || job.version != version) continue;
    const Measured m = measure(outcomes[i]);
    if (m.correct) continue;
    if (!failure) failure = VersionFailure{m.error_kind.empty() ? "failed" : m.error_kind, ""};
    failure->error += (failure->error.empty() ? "" : "\n") + job.size + ": " + m.error;
  }
  return failure;
}

std::string describe_outcome(const JobOutcome& o) {
  const Measured m = measure(o);
  std::string text;
  if (m.correct) {
    text = "ok";
  } else {
    std::string why = m.error;
    if (auto nl = why.find_last_not_of("\n "); nl != std::string::npos) why.resize(nl + 1);
    if (auto nl = why.rfind('\n'); nl != std::string::npos) why = why.substr(nl + 1);
    if (why.size() > 120) why = why.substr(0, 117) + "...";
    text = "failed" + (m.error_kind.empty() ? "" : " (" + m.error_kind + ")") + ": " + why;
  }
  if (!m.stats.is_null()) text += fmt::format(" {:.4g} ms", m.stats["mean"].get<double>());
  return text;
}

Json build_report(const BenchPlan& plan, const std::vector<JobOutcome>& outcomes,
                  int64_t started_ms, int64_t finished_ms) {
  const Json peaks = peak_report(plan, outcomes);
  Json ops = Json::array();
  for (int i = 0; i < static_cast<int>(plan.ops.size()); ++i) {
    ops.push_back(op_report(plan, i, outcomes, peaks));
  }
  std::string device_name = plan.device_facts.value("name", "");
  if (device_name.empty()) device_name = plan.interpreter ? "CPU" : plan.device;
  Json report = {
      {"kforge_version", plan.options.kforge_version},
      {"device", plan.device},
      {"device_name", device_name},
      {"interpreter", plan.interpreter},
      {"timing_note",
       plan.interpreter
           ? Json("cpu device: Triton ran in its interpreter and torch on the CPU; these are CPU "
                  "wall-clock timings of the interpreter, not GPU timings, and are not comparable "
                  "with them")
           : Json()},
      {"runs", plan.options.runs},
      {"correct_trials", plan.options.correct_trials},
      {"sizes", plan.options.sizes},
      {"size_preset", plan.options.size_preset},
      {"size_profile", plan.profile},
      {"regenerate", plan.regenerate},
      {"started_at", iso8601_ms(started_ms)},
      {"finished_at", iso8601_ms(finished_ms)},
      {"peaks", peaks},
      {"ops", std::move(ops)}};
  return report;
}

}  // namespace kforge::bench
