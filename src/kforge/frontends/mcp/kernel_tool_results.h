// Tool results for jobs: the job view (jobs/job_view.h) as structuredContent, a one-line
// summary an agent can act on, and isError for what the caller must fix (the kernel did not
// compile, is incorrect, crashed, timed out; the job failed or was cancelled).
#pragma once

#include <string>
#include <vector>

#include "kforge/frontends/mcp/tool.h"
#include "kforge/jobs/job.h"

namespace kforge::frontends::mcp {

// The result of a kernel tool for a finished job. `warnings` are added to the view.
ToolResult finished_job_result(const jobs::JobRecord& job,
                               const std::vector<std::string>& warnings);

// get_job_status: the job as it is now; never isError (the lookup itself succeeded).
ToolResult job_status_result(const jobs::JobRecord& job);

// The one-line summary of a job view.
std::string summarize_job(const Json& view);

// True when a finished job's verdict is a failure the caller must act on.
bool job_failed(const Json& view);

}  // namespace kforge::frontends::mcp
