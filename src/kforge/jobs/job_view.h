// The JSON a client sees for a job (REST responses, MCP structured results).
#pragma once

#include "kforge/common/json.h"
#include "kforge/jobs/job.h"

namespace kforge::jobs {

// {job_id, status, kind, device, attempts, created_at, started_at, finished_at,
//  kernel_exec_result?, ref_runtime?, speedup?, error?, pod_name}
// compatible with the kernel-evaluation-server response (REFERENCE.md §1). Times are
// ISO-8601 UTC strings.
Json job_response(const JobRecord& job);

// Milliseconds since the Unix epoch as "2026-11-25T21:38:43.123Z".
std::string iso8601_utc(int64_t unix_ms);

}  // namespace kforge::jobs
