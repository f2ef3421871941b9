// The Triton workbench on MCP (docs/workbench.md): its tools (get_overview ... get_best_kernel,
// with the exact names and both argument forms of the Triton-kernel MCP server), its
// knowledge base as resources (kforge://knowledge/...) and its prompts
// (convert_torch_op_to_triton, resume_workbench_session), on the same catalog as the
// evaluation tools, so HTTP (/mcp) and stdio (`kforge mcp`) serve them alike.
//
// Every tool takes an optional `session_id` (resume or address a session explicitly); the MCP
// session is the workbench's caller, so one conversation keeps working on its session without
// repeating it. Execution tools report progress (one step per job, job id in the message) and
// cancel their jobs on notifications/cancelled.
//
// Example:
//   KF_RETURN_IF_ERROR(add_workbench_tools(*catalog, workbench, blocking));
#pragma once

#include <string>

#include "kforge/common/status.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/mcp/protocol/catalog.h"
#include "kforge/jobs/job_service.h"
#include "kforge/workbench/workbench.h"

namespace kforge::frontends::mcp {

// Registers the tools, resources and prompts. `workbench` and `service` (used to cancel jobs)
// and the pool behind `blocking` must outlive every call.
Status add_workbench_tools(Catalog& catalog, workbench::Workbench& workbench,
                           jobs::JobService& service, http::BlockingExecutor blocking);

// What an MCP client is told about the workbench (appended to the instructions).
std::string workbench_instructions();

// The tools' input schemas (exposed for tests).
Json workbench_tool_schema(workbench::Tool tool);

}  // namespace kforge::frontends::mcp
