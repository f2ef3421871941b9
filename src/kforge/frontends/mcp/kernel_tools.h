// The product's MCP tools, on top of the JobService facade (an embedded engine, or a remote
// server through remote_job_service.h):
//
//   evaluate_kernel   compile, check and time one kernel (optionally against a reference)
//   compare_kernels   reference vs candidate: correctness against the reference, both timed
//   validate_kernel   compile + correctness only (no timing)
//   get_job_status    a job and its result, now
//   get_server_stats  queue, jobs by state, devices and their workers
//
// The kernel tools submit a job and answer when it finishes. With a progressToken they
// report progress (0-100, job id in every message); with a logging level of info or lower
// they log the job's start and end. `notifications/cancelled` cancels the job
// (JobService::cancel); a client that merely disconnects does not.
//
// At 2026-07-28, a request that opts in to the tasks extension gets a task instead
// (kernel_tasks.h): evaluate_kernel's and compare_kernels' task is the job itself,
// validate_kernel's a TaskBook task (task_book.h) whose result is the synchronous answer.
//
// Example:
//   KF_RETURN_IF_ERROR(add_kernel_tools(catalog.tools, service, executor, {}));
#pragma once

#include <memory>

#include "kforge/common/status.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/mcp/protocol/tool_registry.h"
#include "kforge/frontends/mcp/task_book.h"
#include "kforge/jobs/job_service.h"
#include "kforge/model/request.h"

namespace kforge::frontends::mcp {

struct KernelToolsOptions {
  model::RequestLimits limits;
  // When set, validate_kernel runs as a durable book task when the request opts in (an
  // evaluation's or a compare's task is its job: kernel_tasks.h).
  std::shared_ptr<TaskBook> book;
};

// Registers the five tools. `service` and the pool behind `blocking` (used for cancels,
// which block) must outlive every call.
Status add_kernel_tools(ToolRegistry& tools, jobs::JobService& service,
                        http::BlockingExecutor blocking, KernelToolsOptions options = {});

// What an MCP client is told about the server (InitializeResult.instructions).
const char* kernel_tools_instructions();

}  // namespace kforge::frontends::mcp
