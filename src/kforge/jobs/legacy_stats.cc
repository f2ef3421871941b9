#include "kforge/jobs/legacy_stats.h"

#include <algorithm>
#include <cmath>

#include "kforge/jobs/job_view.h"

namespace kforge::jobs {
namespace {

constexpr int64_t kRecentWindowMs =
    int64_t{5} * 60 * 1000;  // the old server's "recent" = 5 minutes

double round_to(double value, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(value * scale) / scale;
}

double ratio(int64_t part, int64_t whole) {
  return whole > 0 ? round_to(static_cast<double>(part) / static_cast<double>(whole), 3) : 1.0;
}

Json rounded_map(const std::map<std::string, double>& by_device) {
  Json out = Json::object();
  for (const auto& [device, seconds] : by_device)
    out[device] = round_to(seconds, 2);
  return out;
}

std::string text_of(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void drop_older_than(std::deque<int64_t>& times, int64_t cutoff_ms) {
  while (!times.empty() && times.front() < cutoff_ms)
    times.pop_front();
}

}  // namespace

void DurationSummary::add(double seconds) {
  min = count == 0 ? seconds : std::min(min, seconds);
  max = count == 0 ? seconds : std::max(max, seconds);
  total += seconds;
  ++count;
}

void LegacyMetrics::job_submitted(int64_t now_ms) {
  MutexLock lock(mu_);
  ++requests_;
  recent_submits_ms_.push_back(now_ms);
  drop_older_than(recent_submits_ms_, now_ms - kRecentWindowMs);
}

void LegacyMetrics::job_started(const std::string&, double queue_wait_s) {
  MutexLock lock(mu_);
  ++acquisitions_;
  wait_times_.add(std::max(0.0, queue_wait_s));
}

void LegacyMetrics::job_finished(const FinishedJobSample& s) {
  MutexLock lock(mu_);
  end_to_end_times_.add(std::max(0.0, s.end_to_end_s));
  if (s.state == model::JobState::kSucceeded) {
    ++completed_;
  } else {
    ++failed_;
  }
  if (s.started) {
    ++releases_;
    device_time_s_ += std::max(0.0, s.run_s);
    device_time_by_device_[s.device] += std::max(0.0, s.run_s);
  }
  if (s.result == nullptr || !s.result->is_object()) return;
  const Json& r = *s.result;
  const bool compiled = r.value("compiled", false);
  ++compilations_;
  if (compiled) ++compilations_ok_;
  if (s.compile_s >= 0) compile_times_.add(s.compile_s);
  const Json meta = r.value("metadata", Json::object());
  if (meta.is_object() && meta.contains("compile") && meta["compile"].is_object()) {
    const std::string cache = text_of(meta["compile"], "cache");
    if (cache == "hit") ++cache_hits_;
    if (cache == "miss") ++cache_misses_;
  }
  if (!compiled) return;
  r.value("correctness", false) ? ++correct_ : ++incorrect_;
  if (s.timing_s < 0) return;  // never reached the timing phases
  ++profilings_;
  const Json stats = r.value("runtime_stats", Json());
  if (stats.is_object() && stats.contains("mean")) ++profilings_ok_;
  profile_times_.add(s.timing_s);
  profile_time_by_device_[s.device] += s.timing_s;
}

Json LegacyMetrics::snapshot(double uptime_s, int64_t now_ms) const {
  MutexLock lock(mu_);
  Json compilation = {
      {"total_compilations", compilations_},
      {"successful_compilations", compilations_ok_},
      {"failed_compilations", compilations_ - compilations_ok_},
      {"total_time_seconds", round_to(compile_times_.total, 2)},
      {"average_time_seconds", round_to(compile_times_.average(), 2)},
      {"success_rate", ratio(compilations_ok_, compilations_)},
      {"cache_hit_rate", compilations_ > 0 ? ratio(cache_hits_, compilations_) : 0.0},
      {"cache_hits", cache_hits_},
      {"cache_misses", cache_misses_},
      {"min_time_seconds", round_to(compile_times_.min, 2)},
      {"max_time_seconds", round_to(compile_times_.max, 2)}};
  Json profiling = {{"total_profilings", profilings_},
                    {"successful_profilings", profilings_ok_},
                    {"failed_profilings", profilings_ - profilings_ok_},
                    {"total_time_seconds", round_to(profile_times_.total, 2)},
                    {"average_time_seconds", round_to(profile_times_.average(), 2)},
                    {"success_rate", ratio(profilings_ok_, profilings_)},
                    {"correctness_passed", correct_},
                    {"correctness_failed", incorrect_},
                    {"correctness_rate", ratio(correct_, correct_ + incorrect_)},
                    {"min_time_seconds", round_to(profile_times_.min, 2)},
                    {"max_time_seconds", round_to(profile_times_.max, 2)},
                    {"gpu_usage_times", rounded_map(profile_time_by_device_)}};
  Json gpu = {{"gpu_acquisitions", acquisitions_},
              {"gpu_releases", releases_},
              {"active_sessions", acquisitions_ - releases_},
              {"total_gpu_time_seconds", round_to(device_time_s_, 2)},
              {"total_wait_time_seconds", round_to(wait_times_.total, 2)},
              {"average_wait_time_seconds", round_to(wait_times_.average(), 2)},
              {"max_wait_time_seconds", round_to(wait_times_.max, 2)},
              {"min_wait_time_seconds", round_to(wait_times_.min, 2)},
              {"utilization_by_gpu", rounded_map(device_time_by_device_)}};
  const double minutes = uptime_s / 60.0;
  const auto recent = std::count_if(recent_submits_ms_.begin(), recent_submits_ms_.end(),
                                    [now_ms](int64_t t) { return t >= now_ms - kRecentWindowMs; });
  Json throughput = {
      {"server_uptime_seconds", round_to(uptime_s, 2)},
      {"server_uptime_minutes", round_to(minutes, 2)},
      {"total_requests", requests_},
      {"completed_requests", completed_},
      {"failed_requests", failed_},
      {"success_rate", ratio(completed_, requests_)},
      {"requests_per_minute",
       minutes > 0 ? round_to(static_cast<double>(requests_) / minutes, 2) : 0.0},
      {"recent_throughput_per_minute", round_to(static_cast<double>(recent) / 5.0, 2)},
      {"average_end_to_end_time_seconds", round_to(end_to_end_times_.average(), 2)},
      {"min_end_to_end_time_seconds", round_to(end_to_end_times_.min, 2)},
      {"max_end_to_end_time_seconds", round_to(end_to_end_times_.max, 2)}};
  return Json{{"compilation_metrics", std::move(compilation)},
              {"profiling_metrics", std::move(profiling)},
              {"gpu_utilization", std::move(gpu)},
              {"throughput", std::move(throughput)},
              {"timestamp", epoch_seconds(now_ms)}};
}

Json legacy_job_stats(const std::map<model::JobState, store::Store::StateSummary>& summary,
                      const std::vector<std::string>& running_phases, int64_t now_ms) {
  Json by_status = Json::object();
  int64_t total = 0;
  double age_sum_s = 0;
  for (const auto& [state, s] : summary) {
    if (s.count == 0) continue;
    total += s.count;
    age_sum_s += (static_cast<double>(s.count) * static_cast<double>(now_ms) -
                  static_cast<double>(s.created_ms_sum)) /
                 1000.0;
    if (state != model::JobState::kRunning) {
      std::string name(legacy_job_status(state, ""));
      by_status[name] = by_status.value(name, int64_t{0}) + s.count;
      continue;
    }
    // Split the stored running jobs by the phases this server knows; the rest are compiling.
    int64_t left = s.count;
    for (const std::string& phase : running_phases) {
      if (left == 0) break;
      std::string name(legacy_job_status(state, phase));
      by_status[name] = by_status.value(name, int64_t{0}) + 1;
      --left;
    }
    if (left > 0) by_status["compiling"] = by_status.value("compiling", int64_t{0}) + left;
  }
  return Json{{"total_jobs", total},
              {"by_status", std::move(by_status)},
              {"average_age", total > 0 ? age_sum_s / static_cast<double>(total) : 0.0}};
}

}  // namespace kforge::jobs
