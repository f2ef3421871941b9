// Tool results for jobs: the job view (jobs/job_view.h) as structuredContent and a one-line
// summary an agent can act on. As in the kernel evaluation server's tools, what happened to
// the kernel (it did not compile, is incorrect, crashed, timed out) is a normal result, read
// from its fields (compiled, correctness, compilation_error, validation_error); isError is
// for calls that could not be served (invalid arguments, a job not accepted).
#pragma once

#include <string>
#include <vector>

#include "kforge/frontends/mcp/protocol/tool.h"
#include "kforge/model/job.h"

namespace kforge::frontends::mcp {

// The result of a kernel tool for a finished job: jobs::job_result_view. `warnings` are
// added to the view. `validate` gives validate_kernel's shape: `validated` (= correctness)
// and `compilation_time` at the top level as well.
ToolResult finished_job_result(const model::JobRecord& job,
                               const std::vector<std::string>& warnings, bool validate = false);

// get_job_status: the job as it is now (jobs::job_status_view).
ToolResult job_status_result(const model::JobRecord& job);

// get_job_status for an id no job has: the old tool's {job_id, status: "not_found", error}.
ToolResult job_not_found_result(const std::string& job_id);

// get_server_stats: the old tool's {status, gpu_available, gpu_count, gpu_info, job_stats}
// beside kforge's statistics (JobService::stats) and health.
ToolResult server_stats_result(const Json& stats, const Json& health);

// The one-line summary of a job view.
std::string summarize_job(const Json& view);

// True when a finished job's verdict is a failure (the job did not reach a verdict, or the
// kernel did not compile or is not correct).
bool job_failed(const Json& view);

}  // namespace kforge::frontends::mcp
