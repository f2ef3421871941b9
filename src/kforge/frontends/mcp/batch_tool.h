// The MCP tool batch_compare: one reference, N candidates, the compare options once (the
// arguments are POST /batch's body, docs/rest-api.md "POST /batch"). Each candidate is an ordinary
// compare job; the reference's results are computed once for the batch. Progress counts the
// finished candidates (each message names the job); the answer is {batch_id, jobs, results}
// once every candidate has finished; notifications/cancelled cancels every job of the batch.
//
// With a TaskBook, a 2026-07-28 call that opts in to tasks (kernel_tasks.h) answers at once
// with a task (task_book.h) whose result is that same answer; the task's record keeps the
// batch's job ids, so it survives a restart; tasks/cancel cancels every job of the batch.
#pragma once

#include <memory>

#include "kforge/common/status.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/mcp/protocol/tool_registry.h"
#include "kforge/frontends/mcp/task_book.h"
#include "kforge/jobs/job_service.h"
#include "kforge/model/request.h"

namespace kforge::frontends::mcp {

Status add_batch_tool(ToolRegistry& tools, jobs::JobService& service,
                      http::BlockingExecutor blocking, model::RequestLimits limits,
                      std::shared_ptr<TaskBook> book = nullptr);

}  // namespace kforge::frontends::mcp
