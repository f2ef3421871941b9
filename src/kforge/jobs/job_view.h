// The JSON a client sees for a job (REST responses, MCP structured results), in the shapes
// of the kernel evaluation server kforge replaces (docs/compatibility.md §1) plus kforge's
// fields.
//
// The old server used `status` for two things, and so does kforge:
// - the answer to a submit that waited for the job (POST /evaluate, /compare, /, and the MCP
//   kernel tools): `status` is "success" when the evaluation reached a verdict (whatever it
//   is; see kernel_exec_result) and "error" when kforge could not evaluate the job;
// - a job looked up while or after it runs (GET /job/{id}, the 202 answers, get_job_status):
//   `status` is the job state "submitted", "compiling", "validating", "profiling",
//   "completed" or "failed".
// Both carry `state`, kforge's own job state ("queued", "running", "success", "failed",
// "cancelled"), and the same other fields:
//   {job_id, status, state, phase?, kind, device, attempts, created_at, started_at?,
//    finished_at?, error, kernel_exec_result?, ref_runtime?, ref_runtime_stats?, speedup?,
//    pod_name, pod_ip}
// Times are Unix epoch seconds (numbers). ref_runtime (compares) is a RuntimeStats object.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/model/job.h"

namespace kforge::jobs {

// The old server's job status for a job in `state` (`phase` is the running job's progress
// phase: loading, correctness, timing_reference, timing_candidate).
std::string_view legacy_job_status(model::JobState state, std::string_view phase);

// A job looked up (GET /job/{id}, 202 answers, MCP get_job_status).
Json job_status_view(const model::JobRecord& job);

// A job as one entry of a listing (GET /jobs): small, no sources or samples:
//   {job_id, state, status, phase?, kind, kernel_type, device, submitter, attempts,
//    created_at, started_at?, finished_at?, error, compiled?, correctness?, runtime?,
//    speedup?, speedup_verdict?, error_kind?}
// `kernel_type` is the candidate's (null when the request names none). Works on a full
// record and on a listing's (Store::list_jobs: request and result cut down).
Json job_list_view(const model::JobRecord& job);

// A finished job as the answer to a submit that waited (POST, MCP kernel tools).
Json job_result_view(const model::JobRecord& job);

// kforge's job state read back from a view (`state`, else a kforge `status`, else the old
// status names); nullopt when the view says neither.
std::optional<model::JobState> job_state_of_view(const Json& view);

// This host's name and IPv4 address (the old server's pod_name and pod_ip).
const std::string& pod_name();
const std::string& pod_ip();

// Milliseconds since the Unix epoch as seconds (a JSON number).
double epoch_seconds(int64_t unix_ms);

}  // namespace kforge::jobs
