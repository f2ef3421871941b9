#include "kforge/bench/kernelbench.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "kforge/bench/json_number.h"

namespace kforge::bench::kernelbench {
namespace {

constexpr size_t kMaxReasonChars = 4000;
constexpr int kMaxId = 100000;

// A non-negative decimal integer that is the whole of `text`.
std::optional<int> whole_number(std::string_view text) {
  if (text.empty() || text.size() > 6) return std::nullopt;
  int value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

bool consume(std::string_view& text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// The digits at the front of `text`, consumed.
std::optional<int> leading_number(std::string_view& text) {
  size_t n = 0;
  while (n < text.size() && text[n] >= '0' && text[n] <= '9')
    ++n;
  auto value = whole_number(text.substr(0, n));
  if (value) text.remove_prefix(n);
  return value;
}

std::string string_or_empty(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string capped(std::string text) {
  if (text.size() > kMaxReasonChars) {
    text = text.substr(0, kMaxReasonChars) +
           fmt::format(" [... {} more bytes]", text.size() - kMaxReasonChars);
  }
  return text;
}

// The statistics a record keeps of a side's timing; null when that side was not timed.
Json timing_of(const Json& stats) {
  if (!stats.is_object()) return nullptr;
  auto trials = json_number(stats, "trials");
  if (!trials || *trials <= 0) return nullptr;
  Json out = Json::object();
  for (const char* key : {"mean", "median", "std", "min", "max", "trials", "method"}) {
    if (auto it = stats.find(key); it != stats.end()) out[key] = *it;
  }
  return out;
}

Json base_record(const SampleContext& c, std::string_view status) {
  return Json{{"level", c.key.level},
              {"problem_id", c.key.problem},
              {"sample_id", c.key.sample},
              {"file", c.file},
              {"problem", c.problem},
              {"source_sha256", c.source_sha256},
              {"problem_sha256", c.problem_sha256},
              {"settings", c.settings},
              {"status", std::string(status)},
              {"compiled", false},
              {"correct", false},
              {"reason", nullptr},
              {"error_kind", nullptr},
              {"runtime_ms", nullptr},
              {"runtime_stats", nullptr},
              {"ref_runtime_ms", nullptr},
              {"ref_runtime_stats", nullptr},
              {"speedup", nullptr},
              {"speedup_ci", nullptr},
              {"speedup_verdict", nullptr},
              {"flags", Json::array()},
              {"hardware", nullptr},
              {"device", nullptr},
              {"job_id", nullptr}};
}

bool flagged(const Json& record) {
  auto it = record.find("flags");
  return it != record.end() && it->is_array() && !it->empty();
}

bool correct(const Json& record) {
  return record.value("correct", false);
}

std::string fast_key(double p) {
  return fmt::format("fast_{:g}", p);
}

Json level_summary(const std::vector<const Json*>& records, const std::vector<double>& fast_p) {
  size_t judged = 0, compiled = 0, n_correct = 0, n_flagged = 0, missing = 0;
  std::set<std::pair<int, int>> problems;
  double log_sum = 0;
  size_t log_count = 0;
  for (const Json* r : records) {
    problems.emplace(r->value("level", 0), r->value("problem_id", 0));
    const std::string status = r->value("status", std::string());
    if (status == "judged") ++judged;
    if (status == "missing") ++missing;
    if (r->value("compiled", false)) ++compiled;
    if (!correct(*r)) continue;
    ++n_correct;
    if (flagged(*r)) {
      ++n_flagged;
      continue;
    }
    if (auto s = json_number(*r, "speedup"); s && *s > 0 && std::isfinite(*s)) {
      log_sum += std::log(*s);
      ++log_count;
    }
  }
  const size_t n = records.size();
  auto rate = [n](size_t count) {
    return n == 0 ? 0.0 : static_cast<double>(count) / static_cast<double>(n);
  };
  Json fast = Json::object(), fast_point = Json::object();
  for (double p : fast_p) {
    size_t sure = 0, point = 0;
    for (const Json* r : records) {
      sure += is_fast(*r, p, true) ? 1 : 0;
      point += is_fast(*r, p, false) ? 1 : 0;
    }
    fast[fast_key(p)] = rate(sure);
    fast_point[fast_key(p)] = rate(point);
  }
  return Json{
      {"samples", n},
      {"problems", problems.size()},
      {"judged", judged},
      {"not_judged", n - judged},
      {"missing", missing},
      {"compiled", compiled},
      {"correct", n_correct},
      {"flagged", n_flagged},
      {"correctness_rate", rate(n_correct)},
      {"fast_p", fast},
      {"fast_p_point", fast_point},
      {"geomean_speedup",
       log_count == 0 ? Json(nullptr) : Json(std::exp(log_sum / static_cast<double>(log_count)))},
      {"geomean_count", log_count}};
}

}  // namespace

std::optional<SampleKey> parse_sample_file_name(std::string_view name) {
  std::optional<int> level, problem, sample;
  if (!consume(name, "level_") || !(level = leading_number(name))) return std::nullopt;
  if (!consume(name, "_problem_") || !(problem = leading_number(name))) return std::nullopt;
  if (!consume(name, "_sample_") || !(sample = leading_number(name))) return std::nullopt;
  if (name != "_kernel.py") return std::nullopt;
  return SampleKey{*level, *problem, *sample};
}

std::optional<size_t> invalid_utf8_at(std::string_view text) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = byte(i);
    size_t extra = 0;
    unsigned char low = 0x80, high = 0xBF;  // the bounds of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;  // no UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;  // nothing past U+10FFFF
    } else {
      return i;
    }
    if (i + extra >= text.size()) return i;  // cut short
    for (size_t k = 1; k <= extra; ++k) {
      const unsigned char b = byte(i + k);
      if (k == 1 ? (b < low || b > high) : (b < 0x80 || b > 0xBF)) return i;
    }
    i += extra + 1;
  }
  return std::nullopt;
}

std::string sample_file_name(const SampleKey& key) {
  return fmt::format("level_{}_problem_{}_sample_{}_kernel.py", key.level, key.problem, key.sample);
}

std::optional<int> parse_problem_file_name(std::string_view name) {
  auto id = leading_number(name);
  if (!id || *id < 1 || !consume(name, "_") || name.size() < 4) return std::nullopt;
  if (name.substr(name.size() - 3) != ".py") return std::nullopt;
  return id;
}

StatusOr<std::vector<int>> parse_id_list(std::string_view text, const std::string& field) {
  std::set<int> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const size_t dash = item.find('-');
    auto low = whole_number(item.substr(0, dash));
    auto high = dash == std::string_view::npos ? low : whole_number(item.substr(dash + 1));
    if (!low || !high || *low < 1 || *high > kMaxId || *low > *high) {
      return invalid_argument(
          fmt::format("'{}' is not an id or a range of ids (like 3 or 1-20, each 1-{})", item,
                      kMaxId),
          field);
    }
    for (int id = *low; id <= *high; ++id)
      ids.insert(id);
    start = comma + 1;
  }
  return std::vector<int>(ids.begin(), ids.end());
}

StatusOr<std::vector<double>> parse_fast_p_list(std::string_view text, const std::string& field) {
  std::set<double> values;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item(text.substr(start, comma - start));
    double value = 0;
    const char* end = item.data() + item.size();
    auto [ptr, ec] = std::from_chars(item.data(), end, value);
    if (item.empty() || ec != std::errc() || ptr != end || !(value >= 0) || !std::isfinite(value)) {
      return invalid_argument("'" + item + "' is not a speedup threshold (a number ≥ 0)", field);
    }
    values.insert(value);
    start = comma + 1;
  }
  return std::vector<double>(values.begin(), values.end());
}

Json judged_record(const SampleContext& context, const std::string& job_id, const Json& view) {
  const std::string state = string_or_empty(view, "state");
  const Json exec = view.is_object() ? view.value("kernel_exec_result", Json::object()) : Json();
  // A job cancelled while it ran has a result too (error_kind "cancelled"): no verdict.
  const bool cancelled = state == "cancelled" || string_or_empty(exec, "error_kind") == "cancelled";
  const bool has_verdict = !cancelled && exec.is_object() && exec.contains("correctness");
  Json r = base_record(context, has_verdict ? "judged" : (cancelled ? "cancelled" : "not_judged"));
  r["job_id"] = job_id;
  if (!has_verdict) {
    std::string why = view.is_object() ? string_or_empty(view, "error") : std::string();
    if (why.empty()) why = string_or_empty(exec, "runtime_error");
    r["reason"] =
        capped(why.empty() ? "the job ended without a verdict (state " + state + ")" : why);
    return r;
  }
  r["compiled"] = exec.value("compiled", false);
  r["correct"] = exec.value("correctness", false);
  for (const char* key : {"compilation_error", "validation_error", "runtime_error"}) {
    if (std::string why = string_or_empty(exec, key); !why.empty()) {
      r["reason"] = capped(std::move(why));
      break;
    }
  }
  if (auto kind = exec.find("error_kind"); kind != exec.end() && kind->is_string())
    r["error_kind"] = *kind;
  r["runtime_stats"] = timing_of(exec.value("runtime_stats", Json()));
  if (!r["runtime_stats"].is_null()) r["runtime_ms"] = r["runtime_stats"].value("mean", Json());
  r["ref_runtime_stats"] = timing_of(exec.value("ref_runtime", Json()));
  if (!r["ref_runtime_stats"].is_null())
    r["ref_runtime_ms"] = r["ref_runtime_stats"].value("mean", Json());
  for (const char* key : {"speedup", "speedup_ci", "speedup_verdict"}) {
    if (auto it = exec.find(key); it != exec.end()) r[key] = *it;
  }
  if (auto checks = exec.find("checks"); checks != exec.end() && checks->is_array()) {
    for (const Json& check : *checks) {
      if (!check.is_object() || check.value("passed", true) || check.value("fatal", false))
        continue;
      r["flags"].push_back({{"code", string_or_empty(check, "name")},
                            {"message", capped(string_or_empty(check, "message"))}});
    }
  }
  const Json metadata = exec.value("metadata", Json::object());
  if (metadata.is_object()) {
    if (auto dev = metadata.find("device"); dev != metadata.end() && dev->is_string()) {
      r["device"] = *dev;
      r["hardware"] = *dev;  // the cpu device has no other name
    }
    auto hw = metadata.find("gpu_type");
    if (hw != metadata.end() && hw->is_string() && !hw->get<std::string>().empty()) {
      r["hardware"] = *hw;
    }
  }
  return r;
}

Json unjudged_record(const SampleContext& context, std::string_view status,
                     std::string_view reason) {
  Json r = base_record(context, status);
  r["reason"] = std::string(reason);
  return r;
}

bool is_reusable(const Json& record, const SampleContext& context) {
  return record.is_object() && record.value("status", std::string()) == "judged" &&
         record.value("source_sha256", std::string()) == context.source_sha256 &&
         record.value("problem_sha256", std::string()) == context.problem_sha256 &&
         record.value("settings", std::string()) == context.settings;
}

bool is_fast(const Json& record, double p, bool interval) {
  if (!correct(record) || flagged(record)) return false;
  auto speedup = json_number(record, "speedup");
  if (!speedup || !(*speedup > p)) return false;
  if (!interval) return true;
  const Json ci = record.value("speedup_ci", Json());
  if (ci.is_array() && ci.size() == 2 && ci[0].is_number()) return ci[0].get<double>() > p;
  return true;
}

Json summarize(const std::vector<Json>& records, const std::vector<double>& fast_p) {
  std::map<int, std::vector<const Json*>> by_level;
  std::vector<const Json*> all;
  for (const Json& r : records) {
    by_level[r.value("level", 0)].push_back(&r);
    all.push_back(&r);
  }
  Json levels = Json::object();
  for (const auto& [level, rs] : by_level)
    levels[std::to_string(level)] = level_summary(rs, fast_p);
  return Json{{"levels", levels}, {"all", level_summary(all, fast_p)}, {"fast_p", fast_p}};
}

std::string render_summary(const Json& summary) {
  const std::vector<double> ps = summary.value("fast_p", std::vector<double>());
  std::string out = fmt::format("{:<7} {:>7} {:>8} {:>8} {:>8} {:>8}", "level", "samples",
                                "compiled", "correct", "flagged", "geomean");
  for (double p : ps)
    out += fmt::format(" {:>8}", fast_key(p));
  out += '\n';
  auto row = [&](const std::string& name, const Json& s) {
    const Json g = s.value("geomean_speedup", Json());
    out += fmt::format("{:<7} {:>7} {:>8} {:>8} {:>8} {:>8}", name, s.value("samples", 0),
                       s.value("compiled", 0), s.value("correct", 0), s.value("flagged", 0),
                       g.is_number() ? fmt::format("{:.3f}x", g.get<double>()) : std::string("-"));
    const Json fast = s.value("fast_p", Json::object());
    for (double p : ps)
      out += fmt::format(" {:>8.3f}", fast.value(fast_key(p), 0.0));
    out += '\n';
  };
  const Json levels = summary.value("levels", Json::object());
  for (auto it = levels.begin(); it != levels.end(); ++it)
    row(it.key(), it.value());
  row("all", summary.value("all", Json::object()));
  return out;
}

Json eval_results(const std::vector<Json>& records, int level) {
  std::map<int, std::map<int, Json>> by_problem;
  for (const Json& r : records) {
    if (r.value("level", 0) != level) continue;
    Json metadata = {{"hardware", r.value("hardware", Json())},
                     {"device", r.value("device", Json())},
                     {"kforge_status", r.value("status", Json())},
                     {"kforge_job_id", r.value("job_id", Json())},
                     {"kforge_flags", r.value("flags", Json::array())},
                     {"kforge_speedup", r.value("speedup", Json())}};
    if (const Json why = r.value("reason", Json()); why.is_string()) {
      const char* key = !r.value("compiled", false)                          ? "compilation_error"
                        : r.value("error_kind", std::string()) == "mismatch" ? "correctness_issue"
                                                                             : "runtime_error";
      metadata[key] = why;
    }
    Json stats = Json::object();
    double runtime = -1.0;
    if (const Json s = r.value("runtime_stats", Json()); s.is_object() && correct(r)) {
      runtime = s.value("mean", -1.0);
      stats =
          Json{{"mean", s.value("mean", Json())},         {"std", s.value("std", Json())},
               {"min", s.value("min", Json())},           {"max", s.value("max", Json())},
               {"num_trials", s.value("trials", Json())}, {"hardware", r.value("hardware", Json())},
               {"device", r.value("device", Json())}};
    }
    by_problem[r.value("problem_id", 0)][r.value("sample_id", 0)] =
        Json{{"sample_id", r.value("sample_id", 0)},
             {"compiled", r.value("compiled", false)},
             {"correctness", correct(r)},
             {"metadata", std::move(metadata)},
             {"runtime", runtime},
             {"runtime_stats", std::move(stats)}};
  }
  // Keys sort as strings here ("10" before "9"); KernelBench's readers look them up by name.
  Json out = Json::object();
  for (auto& [problem, samples] : by_problem) {
    Json list = Json::array();
    for (auto& [sample, entry] : samples)
      list.push_back(std::move(entry));
    out[std::to_string(problem)] = std::move(list);
  }
  return out;
}

Json baseline_entry(const Json& record) {
  const Json s = record.value("ref_runtime_stats", Json());
  if (!s.is_object()) return nullptr;
  return Json{
      {"mean", s.value("mean", Json())},         {"std", s.value("std", Json())},
      {"min", s.value("min", Json())},           {"max", s.value("max", Json())},
      {"num_trials", s.value("trials", Json())}, {"hardware", record.value("hardware", Json())},
      {"device", record.value("device", Json())}};
}

}  // namespace kforge::bench::kernelbench
