// assemble_result, describe_exit and message_int of child_channel.h: what a job's child
// left behind (its result, partial result, exit, captured output) as kernel_exec_result.
#include <csignal>

#include "kforge/model/error_kind.h"
#include "kforge/workers/child_channel.h"

namespace kforge::workers {
namespace {

using std::chrono::milliseconds;

std::string phase_text(const std::string& phase) {
  return phase.empty() ? std::string("before the job started") : "during '" + phase + "'";
}

}  // namespace

std::string describe_exit(const std::optional<worker_protocol::ExitStatus>& exit) {
  if (!exit) return "ended (exit status unknown)";
  std::string text = exit->describe();
  switch (exit->signal.value_or(0)) {
    case SIGSEGV:
      text += ": an invalid memory access in host code (e.g. a bad pointer through ctypes)";
      break;
    case SIGABRT:
      text += ": the process aborted (an assertion or a fatal library error)";
      break;
    case SIGKILL:
      text += ": killed (out of memory, or by the operating system)";
      break;
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
      text += ": a fatal fault in native code";
      break;
    default:
      break;
  }
  return text;
}

int64_t message_int(const Json& message, const char* key) {
  auto it = message.find(key);
  return it != message.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

Json assemble_result(const Json& spec, ChildJobEnd& end, milliseconds timeout,
                     const Json& worker_info) {
  Json r;
  if (end.kind == ChildJobEnd::Kind::kResult) {
    r = end.result;
  } else if (end.partial.is_object()) {
    r = end.partial;
  } else {
    r = Json::object();
  }
  if (!r.contains("compiled")) r["compiled"] = false;
  if (!r.contains("correctness")) r["correctness"] = false;
  if (!r.contains("runtime")) r["runtime"] = -1.0;
  if (!r.contains("runtime_stats") || r["runtime_stats"].is_null()) {
    r["runtime_stats"] = Json::object();  // clients of the old server expect an object
  }
  if (!r.contains("metadata") || !r["metadata"].is_object()) r["metadata"] = Json::object();
  Json& meta = r["metadata"];
  const Json& kernel = spec.contains("kernel") ? spec["kernel"] : Json::object();
  if (!meta.contains("kernel_type") && kernel.contains("kernel_type")) {
    meta["kernel_type"] = kernel["kernel_type"];
  }
  if (!meta.contains("device") && spec.contains("device")) meta["device"] = spec["device"];
  if (spec.contains("reference") && spec["reference"].is_object() &&
      !meta.contains("ref_kernel_type")) {
    meta["ref_kernel_type"] = spec["reference"].value("kernel_type", "");
  }

  auto fail = [&](model::ErrorKind kind, const std::string& message) {
    r["correctness"] = false;
    r["error_kind"] = model::to_string(kind);
    r["runtime_error"] = message;
    if (!r.contains("runtime") || !r["runtime"].is_number()) r["runtime"] = -1.0;
  };
  const std::string when = phase_text(end.phase);
  switch (end.kind) {
    case ChildJobEnd::Kind::kResult:
      break;
    case ChildJobEnd::Kind::kTimeout: {
      double secs = static_cast<double>(timeout.count()) / 1000.0;
      std::string s = Json(secs).dump();
      fail(model::ErrorKind::kTimeout,
           "timed out after " + s + " s " + when +
               ": the kernel process group was killed (raise 'timeout' if the "
               "kernel is legitimately slow; look for an infinite loop otherwise)");
      break;
    }
    case ChildJobEnd::Kind::kCancelled:
      fail(model::ErrorKind::kCancelled, "cancelled " + when);
      break;
    case ChildJobEnd::Kind::kCrashed:
      fail(model::ErrorKind::kCrash, "the kernel process " + describe_exit(end.exit) + " " + when);
      break;
    case ChildJobEnd::Kind::kMemoryLimit:
      fail(model::ErrorKind::kMemoryLimit, "the job's processes used " +
                                               std::to_string(end.peak_rss_bytes >> 20) +
                                               " MiB of host memory, over its limit, " + when +
                                               ": every process of the job was killed");
      break;
    case ChildJobEnd::Kind::kProtocolError:
      fail(model::ErrorKind::kWorker, "the worker broke the protocol " + when + ": " + end.detail);
      break;
  }
  r["stdout"] = end.stdout_capture.text();
  r["stderr"] = end.stderr_capture.text();
  if (end.stdout_capture.truncated() || end.stderr_capture.truncated()) {
    r["output_truncated"] = Json{{"stdout_bytes", end.stdout_capture.total_bytes()},
                                 {"stderr_bytes", end.stderr_capture.total_bytes()}};
  }
  Json process = {{"wall_ms", end.wall_ms}, {"peak_rss_bytes", end.peak_rss_bytes}};
  if (end.cgroup_oom_kills > 0) process["oom_kills"] = end.cgroup_oom_kills;
  if (end.device_wait_ms > 0) process["device_wait_ms"] = end.device_wait_ms;
  process["teardown_ms"] = end.teardown_ms;
  if (!end.device_grants.empty()) process["device_grants"] = end.device_grants;
  if (end.pids_limit_hits > 0) {
    process["pids_limit_hits"] = end.pids_limit_hits;
    r["warnings"].push_back("the job hit its process limit (pids.max) " +
                            std::to_string(end.pids_limit_hits) + " time(s)");
  }
  if (end.exit && end.exit->exit_code) process["exit_code"] = *end.exit->exit_code;
  if (end.exit && end.exit->signal) process["signal"] = *end.exit->signal;
  r["process"] = std::move(process);
  r["worker"] = worker_info;
  return r;
}

}  // namespace kforge::workers
