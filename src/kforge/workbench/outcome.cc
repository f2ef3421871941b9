#include "kforge/workbench/outcome.h"

#include <fmt/format.h>

#include <regex>

namespace kforge::workbench {
namespace {

constexpr size_t kMaxOutput = 4000;
constexpr size_t kMaxError = 6000;

std::string trimmed(std::string text, size_t limit) {
  if (text.size() <= limit) return text;
  const size_t keep = limit / 2;
  return text.substr(0, keep) + "\n... [" + std::to_string(text.size() - 2 * keep) +
         " bytes cut] ...\n" + text.substr(text.size() - keep);
}

// Tracebacks name the job's scratch copies; name the files the agent knows instead.
std::string map_paths(const std::string& text, const std::string& kernel_file) {
  static const std::regex candidate(R"re("[^"\n]*/candidate\.py")re");
  static const std::regex reference(R"re("[^"\n]*/reference\.py")re");
  std::string out = std::regex_replace(text, candidate, "\"" + kernel_file + "\"");
  return std::regex_replace(out, reference, "\"reference_code\"");
}

Json stats_view(const Json& stats) {
  if (!stats.is_object()) return Json();
  Json out = {
      {"median_ms", stats.value("median", Json())}, {"mean_ms", stats.value("mean", Json())},
      {"min_ms", stats.value("min", Json())},       {"max_ms", stats.value("max", Json())},
      {"std_ms", stats.value("std", Json())},       {"trials", stats.value("trials", Json())},
      {"method", stats.value("method", Json())},    {"l2_flush", stats.value("l2_flush", Json())}};
  return out;
}

std::string verdict_of(const Json& result) {
  std::string kind = result.value("error_kind", Json()).is_string()
                         ? result["error_kind"].get<std::string>()
                         : std::string();
  if (kind == "compile") return "compile_error";
  if (kind == "runtime" || kind == "worker") return "runtime_error";
  if (kind == "mismatch") return "mismatch";
  if (kind == "timeout" || kind == "crash" || kind == "memory_limit") return kind;
  if (kind == "cancelled") return "cancelled";
  if (!result.value("compiled", false)) return "compile_error";
  if (result.contains("correctness") && result["correctness"].is_boolean() &&
      !result["correctness"].get<bool>()) {
    return "mismatch";
  }
  return "ok";
}

}  // namespace

Json CaseOutcome::to_json() const {
  Json j = {{"label", label},       {"job_id", job_id}, {"verdict", verdict},
            {"compiled", compiled}, {"device", device}, {"inputs", input_summary}};
  j["correct"] = correct ? Json(*correct) : Json();
  if (!error.empty()) j["error"] = error;
  if (!correctness.is_null()) j["correctness"] = correctness;
  if (!timing.is_null()) j["timing"] = timing;
  if (!ref_timing.is_null()) j["reference_timing"] = ref_timing;
  if (speedup) j["speedup"] = *speedup;
  if (!speedup_ci.is_null()) j["speedup_ci"] = speedup_ci;
  if (!speedup_verdict.empty()) j["speedup_verdict"] = speedup_verdict;
  if (!output.empty()) j["output"] = output;
  if (!flags.empty()) j["flags"] = flags;
  if (!roofline.is_null()) j["roofline"] = roofline;
  if (!timing.is_null()) j["median_ms"] = timing.value("median_ms", Json());
  return j;
}

std::string case_speedup_cell(const Json& c) {
  const Json speedup = c.value("speedup", Json());
  if (!speedup.is_number()) return "-";
  std::string out = fmt::format("{:.3g}x", speedup.get<double>());
  const Json ci = c.value("speedup_ci", Json());
  const std::string verdict = c.value("speedup_verdict", std::string());
  if (ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number()) {
    out += fmt::format(" ({:.3g}-{:.3g}{}{})", ci[0].get<double>(), ci[1].get<double>(),
                       verdict.empty() ? "" : ", ", verdict);
  } else if (!verdict.empty()) {
    out += " (" + verdict + ")";
  }
  return out;
}

CaseOutcome interpret_job(const InputCase& input_case, const model::JobRecord& job,
                          const std::string& kernel_file) {
  CaseOutcome o;
  o.label = input_case.label;
  o.job_id = job.id;
  o.device = job.device;
  if (job.state == model::JobState::kCancelled) {
    o.verdict = "cancelled";
    o.error = "the job was cancelled" + (job.error.empty() ? "" : ": " + job.error);
    return o;
  }
  const Json& r = job.result;
  if (job.state != model::JobState::kSucceeded || !r.is_object()) {
    o.verdict = "job_failed";
    o.error = "kforge could not run the job (" + std::string(model::to_string(job.state)) +
              "): " + (job.error.empty() ? "no reason recorded" : job.error);
    return o;
  }
  o.verdict = verdict_of(r);
  o.compiled = r.value("compiled", false);
  std::string error;
  for (const char* key : {"compilation_error", "runtime_error", "validation_error"}) {
    if (r.contains(key) && r[key].is_string() && !r[key].get<std::string>().empty()) {
      if (!error.empty()) error += "\n";
      error += r[key].get<std::string>();
    }
  }
  o.error = trimmed(map_paths(error, kernel_file), kMaxError);
  // Failures of the reference or of the test inputs are no verdict on the kernel.
  if (error.starts_with("reference kernel") ||
      error.find("the reference kernel") != std::string::npos) {
    o.verdict = "reference_error";
  } else if (error.find("could not build the inputs") != std::string::npos ||
             error.find("could not build the timing inputs") != std::string::npos ||
             error.find("File \"test_input_code\"") != std::string::npos ||
             error.find("get_inputs()") != std::string::npos) {
    o.verdict = "input_error";
  }
  if (r.contains("correctness_details") && r["correctness_details"].is_object()) {
    const Json& d = r["correctness_details"];
    o.correctness = {{"max_abs_error", d.value("max_abs_error", Json())},
                     {"max_rel_error", d.value("max_rel_error", Json())},
                     {"mismatch_count", d.value("mismatch_count", Json())},
                     {"numel", d.value("numel", Json())},
                     {"atol", d.value("atol", Json())},
                     {"rtol", d.value("rtol", Json())},
                     {"trials", d.value("trials", Json())},
                     {"trials_passed", d.value("trials_passed", Json())}};
    if (d.contains("first_mismatch") && !d["first_mismatch"].is_null()) {
      o.correctness["first_mismatch"] = d["first_mismatch"];
    }
  }
  if (o.verdict == "ok" || o.verdict == "mismatch") {
    o.correct = o.verdict == "ok" && r.value("correctness", false);
  } else if (o.verdict == "compile_error" || o.verdict == "runtime_error" ||
             o.verdict == "timeout" || o.verdict == "crash" || o.verdict == "memory_limit") {
    o.correct = false;  // the kernel itself failed: a verdict on this version
  }
  if (r.contains("runtime_stats") && r["runtime_stats"].is_object()) {
    o.timing = stats_view(r["runtime_stats"]);
  }
  if (r.contains("ref_runtime_stats") && r["ref_runtime_stats"].is_object()) {
    o.ref_timing = stats_view(r["ref_runtime_stats"]);
  }
  if (r.contains("speedup") && r["speedup"].is_number()) o.speedup = r["speedup"].get<double>();
  if (auto ci = r.find("speedup_ci"); ci != r.end() && ci->is_array() && ci->size() == 2) {
    o.speedup_ci = *ci;
  }
  if (auto v = r.find("speedup_verdict"); v != r.end() && v->is_string()) o.speedup_verdict = *v;
  const Json metadata = r.value("metadata", Json::object());
  for (const auto& in : metadata.value("inputs", Json::array())) {
    Json entry = {{"name", in.value("name", "")}};
    if (in.contains("shape") && in["shape"].is_array()) {
      TensorShape t;
      t.shape = in["shape"].get<std::vector<int64_t>>();
      const std::string dtype = in.value("dtype", "");
      t.element_size = dtype_size(dtype);
      t.dtype = dtype;
      o.inputs.push_back(t);
      entry["shape"] = in["shape"];
      entry["dtype"] = dtype;
    } else {
      entry["type"] = in.value("type", Json());
      if (entry["type"] == "dict") entry["name"] = "kwargs";
    }
    o.input_summary.push_back(std::move(entry));
  }
  std::string output = r.value("stdout", "");
  const std::string err = r.value("stderr", "");
  if (!err.empty()) output += (output.empty() ? "" : "\n") + std::string("[stderr]\n") + err;
  o.output = trimmed(map_paths(output, kernel_file), kMaxOutput);
  for (const auto& h : r.value("honesty", Json::array())) {
    o.flags.push_back(fmt::format("{}{}: {}", h.value("code", "check"),
                                  h.value("fatal", false) ? " (fatal)" : "",
                                  h.value("message", "")));
  }
  for (const auto& w : r.value("warnings", Json::array())) {
    if (!w.is_string()) continue;
    const std::string text = w.get<std::string>();
    bool seen = false;
    for (const auto& f : o.flags)
      seen = seen || f.find(text) != std::string::npos;
    if (!seen) o.flags.push_back(text);
  }
  return o;
}

double measured_peak(const Json& peaks, const std::string& key) {
  if (!peaks.is_object() || !peaks.contains(key) || !peaks[key].is_number()) return 0.0;
  return peaks[key].get<double>();
}

void add_roofline(CaseOutcome& o, const Json* op, const Json& peaks) {
  if (o.timing.is_null() || !o.timing.value("median_ms", Json()).is_number()) return;
  const double ms = o.timing["median_ms"].get<double>();
  Json roof = {{"time_ms", ms}};
  if (o.device == "cpu") roof["note"] = "CPU timing (Triton interpreter): not a GPU roofline";
  if (op == nullptr) {
    roof["bytes"] = nullptr;
    roof["reason"] = "bytes and FLOPs unknown: the kernel name is not an op of get_torch_op_info";
    o.roofline = std::move(roof);
    return;
  }
  auto bytes = evaluate_formula(op->value("bytes", ""), o.inputs);
  auto flops = evaluate_formula(op->value("flops", ""), o.inputs);
  if (!bytes.is_ok() || !flops.is_ok()) {
    roof["reason"] = "the op's bytes/FLOPs formulas do not fit these inputs: " +
                     (bytes.is_ok() ? flops.status() : bytes.status()).message();
    o.roofline = std::move(roof);
    return;
  }
  const double seconds = ms * 1e-3;
  roof["bytes"] = *bytes;
  roof["flops"] = *flops;
  roof["achieved_gb_s"] = seconds > 0 ? *bytes / seconds / 1e9 : 0.0;
  roof["achieved_tflop_s"] = seconds > 0 ? *flops / seconds / 1e12 : 0.0;
  roof["bound"] = op->value("bound", "");
  const double peak_bw = measured_peak(peaks, "bandwidth_gb_s");
  if (peak_bw > 0) {
    roof["peak_gb_s"] = peak_bw;
    roof["pct_of_peak_bandwidth"] = 100.0 * roof["achieved_gb_s"].get<double>() / peak_bw;
  }
  const Json flop_peaks = peaks.is_object() ? peaks.value("flop_s", Json()) : Json();
  if (flop_peaks.is_object()) {
    // The peak of the first input's dtype (the measured peaks are GEMM rates per dtype).
    const std::string in = o.inputs.empty() ? "" : o.inputs[0].dtype;
    const std::string dtype = in == "float16" ? "fp16" : in == "bfloat16" ? "bf16" : "fp32";
    if (measured_peak(flop_peaks, dtype) > 0) {
      const double peak = measured_peak(flop_peaks, dtype) / 1e12;
      roof["peak_tflop_s"] = peak;
      roof["peak_flops_dtype"] = dtype;
      roof["pct_of_peak_flops"] = 100.0 * roof["achieved_tflop_s"].get<double>() / peak;
    }
  }
  if (!roof.contains("pct_of_peak_bandwidth") && !roof.contains("pct_of_peak_flops")) {
    roof["peak"] = o.device == "cpu"
                       ? "not applicable on the cpu device"
                       : "unknown: this server has not measured the device's peaks (/health "
                         "shows them once measured)";
  }
  o.roofline = std::move(roof);
}

}  // namespace kforge::workbench
