#include "kforge/jobs/job_view.h"

#include <unistd.h>

#include <ctime>

namespace kforge::jobs {
namespace {

const std::string& host_name() {
  static const std::string name = [] {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) != 0) return std::string("unknown");
    return std::string(buf);
  }();
  return name;
}

}  // namespace

std::string iso8601_utc(int64_t unix_ms) {
  time_t secs = static_cast<time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof(buf) - n, ".%03dZ", static_cast<int>(unix_ms % 1000));
  return buf;
}

Json job_response(const JobRecord& job) {
  Json j = {{"job_id", job.id},
            {"status", to_string(job.state)},
            {"kind", model::to_string(job.kind)},
            {"device", job.device},
            {"attempts", job.attempts},
            {"created_at", iso8601_utc(job.created_ms)},
            {"pod_name", host_name()}};
  if (job.started_ms > 0) j["started_at"] = iso8601_utc(job.started_ms);
  if (job.finished_ms > 0) j["finished_at"] = iso8601_utc(job.finished_ms);
  if (!job.error.empty()) j["error"] = job.error;
  if (job.result.is_object()) {
    j["kernel_exec_result"] = job.result;
    for (const char* key : {"ref_runtime", "ref_runtime_stats", "speedup"}) {
      auto it = job.result.find(key);
      if (it != job.result.end()) j[key] = *it;
    }
  }
  return j;
}

}  // namespace kforge::jobs
