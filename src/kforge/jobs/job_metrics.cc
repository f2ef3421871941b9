#include "kforge/jobs/job_metrics.h"

namespace kforge::jobs {
namespace {

// The phases of docs/worker-protocol.md; other keys are not made into label values.
constexpr const char* kKnownPhases[] = {"import",    "compile", "inputs", "reference",
                                        "candidate", "compare", "timing"};

bool known_phase(const std::string& phase) {
  for (const char* p : kKnownPhases) {
    if (phase == p) return true;
  }
  return false;
}

}  // namespace

const std::vector<double>& JobMetrics::latency_buckets() {
  static const std::vector<double> buckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                              0.1,   0.25,   0.5,   1,    2.5,   5,
                                              10,    30,     60,    120,  300,   600};
  return buckets;
}

void JobMetrics::job_finished(const std::string& kernel_type, model::JobState state,
                              const Json& result, double run_s) {
  const auto& bounds = latency_buckets();
  MutexLock lock(mu_);
  ++finished_[{std::string(to_string(state)), kernel_type}];
  if (run_s >= 0) runs_[kernel_type].observe(bounds, run_s);
  if (!result.is_object()) return;
  auto phases = result.find("phases_ms");
  if (phases == result.end() || !phases->is_object()) return;
  for (const auto& [phase, ms] : phases->items()) {
    if (!known_phase(phase) || !ms.is_number() || ms.get<double>() < 0) continue;
    phases_[{phase, kernel_type}].observe(bounds, ms.get<double>() / 1000.0);
  }
}

void JobMetrics::write(PrometheusText& out) const {
  const auto& bounds = latency_buckets();
  MutexLock lock(mu_);
  out.family("kforge_jobs_finished_total", "counter",
             "Jobs that reached a terminal state since the server started.");
  for (const auto& [key, n] : finished_) {
    out.sample("kforge_jobs_finished_total", {{"state", key.first}, {"kernel_type", key.second}},
               static_cast<double>(n));
  }
  out.family("kforge_job_phase_seconds", "histogram",
             "Wall time of each phase a worker reported in phases_ms (import, compile, inputs, "
             "reference, candidate, compare, timing).");
  for (const auto& [key, h] : phases_) {
    out.histogram("kforge_job_phase_seconds", {{"phase", key.first}, {"kernel_type", key.second}},
                  bounds, h);
  }
  out.family("kforge_job_run_seconds", "histogram",
             "Wall time of jobs from their start on a device to their end.");
  for (const auto& [kernel_type, h] : runs_) {
    out.histogram("kforge_job_run_seconds", {{"kernel_type", kernel_type}}, bounds, h);
  }
}

}  // namespace kforge::jobs
