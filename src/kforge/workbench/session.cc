#include "kforge/workbench/session.h"

#include <cmath>

namespace kforge::workbench {
namespace {

constexpr size_t kKeptErrors = 5;
constexpr size_t kKeptHistory = 50;

// The more recent of results[a] and results[b] (by at_ms), or nullptr.
const Json* latest_of(const Json& results, const char* a, const char* b) {
  const Json* x = results.contains(a) ? &results[a] : nullptr;
  const Json* y = results.contains(b) ? &results[b] : nullptr;
  if (x == nullptr) return y;
  if (y == nullptr) return x;
  return x->value("at_ms", int64_t{0}) >= y->value("at_ms", int64_t{0}) ? x : y;
}

void push_bounded(Json& array, Json item, size_t keep) {
  if (!array.is_array()) array = Json::array();
  array.push_back(std::move(item));
  while (array.size() > keep)
    array.erase(array.begin());
}

}  // namespace

std::optional<bool> Version::correct() const {
  const Json* verdict = latest_of(results, "validation", "benchmark");
  if (verdict == nullptr) return std::nullopt;
  if (verdict->contains("passed") && (*verdict)["passed"].is_boolean()) {
    return (*verdict)["passed"].get<bool>();
  }
  if (verdict->contains("correct") && (*verdict)["correct"].is_boolean()) {
    return (*verdict)["correct"].get<bool>();
  }
  return std::nullopt;
}

std::optional<double> Version::time_ms() const {
  const Json* timing = latest_of(results, "timing", "benchmark");
  if (timing == nullptr) return std::nullopt;
  double log_sum = 0;
  int n = 0;
  for (const auto& c : timing->value("cases", Json::array())) {
    const Json median = c.value("median_ms", Json());
    if (!median.is_number() || median.get<double>() <= 0) return std::nullopt;
    log_sum += std::log(median.get<double>());
    ++n;
  }
  if (n == 0) return std::nullopt;
  return std::exp(log_sum / n);
}

std::optional<model::TimeEstimate> Version::time_estimate() const {
  const Json* timing = latest_of(results, "timing", "benchmark");
  if (timing == nullptr) return std::nullopt;
  std::vector<model::TimeEstimate> parts;
  for (const auto& c : timing->value("cases", Json::array())) {
    Json summary = c.value("timing", Json::object());
    if (!summary.is_object()) summary = Json::object();
    if (!summary.contains("median_ms")) summary["median_ms"] = c.value("median_ms", Json());
    auto part = model::TimeEstimate::from_json(summary, "median_ms");
    if (!part) return std::nullopt;
    parts.push_back(*part);
  }
  return model::geometric_mean(parts);
}

std::string Version::time_source() const {
  const Json* timing = latest_of(results, "timing", "benchmark");
  if (timing == nullptr) return "";
  return results.contains("timing") && timing == &results.at("timing") ? "measure_kernel_time"
                                                                       : "benchmark_kernel";
}

Version* Session::find(int number) {
  for (auto& v : versions) {
    if (v.number == number) return &v;
  }
  return nullptr;
}

const Version* Session::best() const {
  const Version* best = nullptr;
  for (const auto& v : versions) {
    if (v.correct() != true || !v.time_ms()) continue;
    if (best == nullptr || *v.time_ms() < *best->time_ms()) best = &v;
  }
  if (best != nullptr) return best;
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    if (it->correct() == true) return &*it;
  }
  return nullptr;
}

std::vector<int> Session::tied_with_best() const {
  std::vector<int> tied;
  const Version* top = best();
  if (top == nullptr) return tied;
  const auto top_time = top->time_estimate();
  if (!top_time) return tied;
  const double systematic = model::systematic_error(settings.device);
  for (const auto& v : versions) {
    if (&v == top || v.correct() != true) continue;
    const auto time = v.time_estimate();
    if (time && model::ratio_interval(*time, *top_time, systematic).covers(1.0)) {
      tied.push_back(v.number);
    }
  }
  return tied;
}

std::string Session::end_blocker() const {
  const int written = static_cast<int>(versions.size());
  if (written < settings.min_versions) {
    return std::to_string(written) + " of the " + std::to_string(settings.min_versions) +
           " versions this session needs are written";
  }
  std::string unevaluated;
  for (const auto& v : versions) {
    if (!v.evaluated())
      unevaluated += (unevaluated.empty() ? "v" : ", v") + std::to_string(v.number);
  }
  if (!unevaluated.empty()) {
    return "every version must be evaluated (validate_correctness or benchmark_kernel); not yet: " +
           unevaluated;
  }
  if (best() == nullptr) return "no version passed validation yet";
  return "";
}

void Session::transition(State to, const std::string& why, int64_t now_ms) {
  if (to == state) return;
  push_bounded(notes["history"],
               Json{{"at_ms", now_ms},
                    {"from", std::string(to_string(state))},
                    {"to", std::string(to_string(to))},
                    {"why", why}},
               kKeptHistory);
  state = to;
}

void Session::note_error(const std::string& tool, int version, const std::string& error,
                         int64_t now_ms) {
  push_bounded(notes["last_errors"],
               Json{{"at_ms", now_ms}, {"tool", tool}, {"version", version}, {"error", error}},
               kKeptErrors);
}

store::WorkbenchSessionRecord Session::record() const {
  store::WorkbenchSessionRecord r;
  r.id = id;
  r.kernel_name = kernel_name;
  r.state = std::string(to_string(state));
  r.workspace = workspace;
  r.data = Json{{"schema", 1},
                {"settings",
                 {{"min_versions", settings.min_versions},
                  {"context_budget_tokens", settings.context_budget_tokens},
                  {"device", settings.device}}},
                {"context",
                 {{"tokens", context.tokens},
                  {"total_tokens", context.total_tokens},
                  {"calls", context.calls},
                  {"epoch", context.epoch},
                  {"summary_written_ms", context.summary_written_ms}}},
                {"notes", notes},
                {"owner", owner}};
  r.created_ms = created_ms;
  r.updated_ms = updated_ms;
  return r;
}

std::string Session::owner_of(const store::WorkbenchSessionRecord& record) {
  auto it = record.data.find("owner");
  return it != record.data.end() && it->is_string() ? it->get<std::string>() : std::string();
}

store::WorkbenchVersionRecord Session::version_record(const Version& v) const {
  return store::WorkbenchVersionRecord{id, v.number, v.file, v.source, v.results, v.created_ms};
}

StatusOr<Session> Session::from_records(
    const store::WorkbenchSessionRecord& r,
    const std::vector<store::WorkbenchVersionRecord>& versions) {
  Session s;
  s.id = r.id;
  s.kernel_name = r.kernel_name;
  const std::optional<State> state = state_from(r.state);
  if (!state) return internal_error("workbench session " + r.id + ": unknown state " + r.state);
  s.state = *state;
  s.workspace = r.workspace;
  try {
    const Json& settings = r.data.at("settings");
    s.settings.min_versions = settings.at("min_versions").get<int>();
    s.settings.context_budget_tokens = settings.at("context_budget_tokens").get<int64_t>();
    s.settings.device = settings.at("device").get<std::string>();
    const Json& context = r.data.at("context");
    s.context.tokens = context.at("tokens").get<int64_t>();
    s.context.total_tokens = context.at("total_tokens").get<int64_t>();
    s.context.calls = context.at("calls").get<int64_t>();
    s.context.epoch = context.at("epoch").get<int>();
    s.context.summary_written_ms = context.at("summary_written_ms").get<int64_t>();
    s.notes = r.data.value("notes", Json::object());
    s.owner = owner_of(r);
  } catch (const Json::exception& e) {
    return internal_error("workbench session " + r.id + ": corrupted data: " + e.what());
  }
  s.created_ms = r.created_ms;
  s.updated_ms = r.updated_ms;
  for (const auto& v : versions) {
    s.versions.push_back(Version{v.version, v.file, v.source, v.results, v.created_ms});
  }
  return s;
}

}  // namespace kforge::workbench
