#include "kforge/jobs/job_view.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include "kforge/jobs/exec_result_view.h"

namespace kforge::jobs {
namespace {

std::string lookup_host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

// The host name's first IPv4 address, like the old server's gethostbyname(gethostname()).
std::string lookup_host_ip(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return "127.0.0.1";
  }
  char text[INET_ADDRSTRLEN] = {};
  const auto* addr = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  const bool ok = inet_ntop(AF_INET, &addr->sin_addr, text, sizeof(text)) != nullptr;
  freeaddrinfo(found);
  return ok ? std::string(text) : std::string("127.0.0.1");
}

// Fields shared by both views; `status` is set by the caller.
Json common_view(const model::JobRecord& job) {
  Json j = {{"job_id", job.id},
            {"state", to_string(job.state)},
            {"kind", model::to_string(job.kind)},
            {"device", job.device},
            {"attempts", job.attempts},
            {"created_at", epoch_seconds(job.created_ms)},
            {"error", job.error.empty() ? Json() : Json(job.error)},
            {"pod_name", pod_name()},
            {"pod_ip", pod_ip()}};
  if (job.state == model::JobState::kRunning && !job.phase.empty()) j["phase"] = job.phase;
  if (job.started_ms > 0) j["started_at"] = epoch_seconds(job.started_ms);
  if (job.finished_ms > 0) j["finished_at"] = epoch_seconds(job.finished_ms);
  const bool is_compare = job.kind == model::JobKind::kCompare;
  if (job.result.is_object()) {
    Json r = exec_result_view(job.result, is_compare);
    for (const char* key : kTopLevelResultFields) {
      auto it = r.find(key);
      if (it != r.end()) j[key] = *it;
    }
    j["kernel_exec_result"] = std::move(r);
  }
  return j;
}

}  // namespace

std::string_view legacy_job_status(model::JobState state, std::string_view phase) {
  switch (state) {
    case model::JobState::kQueued:
      return "submitted";
    case model::JobState::kRunning:
      if (phase == "correctness") return "validating";
      if (phase == "timing_reference" || phase == "timing_candidate") return "profiling";
      return "compiling";
    case model::JobState::kSucceeded:
      return "completed";
    case model::JobState::kFailed:
    case model::JobState::kCancelled:
      return "failed";
  }
  return "failed";
}

Json job_status_view(const model::JobRecord& job) {
  Json j = common_view(job);
  j["status"] = legacy_job_status(job.state, job.phase);
  return j;
}

Json job_list_view(const model::JobRecord& job) {
  Json j = {{"job_id", job.id},
            {"state", to_string(job.state)},
            {"status", legacy_job_status(job.state, job.phase)},
            {"kind", model::to_string(job.kind)},
            {"device", job.device},
            {"submitter", job.submitter},
            {"attempts", job.attempts},
            {"created_at", epoch_seconds(job.created_ms)},
            {"error", job.error.empty() ? Json() : Json(job.error)}};
  Json kernel_type;
  for (const char* side : {"custom_kernel", "kernel"}) {
    if (!job.request.is_object()) break;
    auto kernel = job.request.find(side);
    if (kernel == job.request.end() || !kernel->is_object()) continue;
    auto type = kernel->find("kernel_type");
    if (type != kernel->end() && type->is_string()) {
      kernel_type = *type;
      break;
    }
  }
  j["kernel_type"] = std::move(kernel_type);
  if (job.state == model::JobState::kRunning && !job.phase.empty()) j["phase"] = job.phase;
  if (job.started_ms > 0) j["started_at"] = epoch_seconds(job.started_ms);
  if (job.finished_ms > 0) j["finished_at"] = epoch_seconds(job.finished_ms);
  if (job.result.is_object()) {
    Json given = Json::object();  // a listing's result has null members for absent ones
    for (const auto& [key, value] : job.result.items()) {
      if (!value.is_null()) given[key] = value;
    }
    const Json r = exec_result_view(given, job.kind == model::JobKind::kCompare);
    for (const char* key :
         {"compiled", "correctness", "runtime", "speedup", "speedup_verdict", "error_kind"}) {
      if (auto it = r.find(key); it != r.end() && !it->is_null()) j[key] = *it;
    }
  }
  return j;
}

Json job_result_view(const model::JobRecord& job) {
  Json j = common_view(job);
  j["status"] = job.state == model::JobState::kSucceeded ? "success" : "error";
  if (!j.contains("kernel_exec_result")) {
    // The old server's error answer carried empty objects here.
    j["kernel_exec_result"] = Json::object();
    if (job.kind == model::JobKind::kCompare) j["ref_runtime"] = Json::object();
  }
  return j;
}

std::optional<model::JobState> job_state_of_view(const Json& view) {
  if (!view.is_object()) return std::nullopt;
  if (auto s = model::job_state_from(view.value("state", ""))) return s;
  const std::string status = view.value("status", "");
  if (auto s = model::job_state_from(status)) return s;
  if (status == "submitted") return model::JobState::kQueued;
  if (status == "compiling" || status == "validating" || status == "profiling") {
    return model::JobState::kRunning;
  }
  if (status == "completed") return model::JobState::kSucceeded;
  return std::nullopt;
}

const std::string& pod_name() {
  static const std::string name = lookup_host_name();
  return name;
}

const std::string& pod_ip() {
  static const std::string ip = lookup_host_ip(pod_name());
  return ip;
}

double epoch_seconds(int64_t unix_ms) {
  return static_cast<double>(unix_ms) / 1000.0;
}

}  // namespace kforge::jobs
