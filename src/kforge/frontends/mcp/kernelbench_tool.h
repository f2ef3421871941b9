// The MCP tool kernelbench_eval: a batch of KernelBench problems with their generated samples
// (the arguments are POST /kernelbench's body, docs/rest-api.md "POST /kernelbench"), one
// batch_compare per problem. Progress counts the finished samples; the answer is {batches,
// samples, summary} once every sample has finished; notifications/cancelled cancels the jobs.
#pragma once

#include "kforge/common/status.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/mcp/protocol/tool_registry.h"
#include "kforge/jobs/job_service.h"
#include "kforge/model/request.h"

namespace kforge::frontends::mcp {

Status add_kernelbench_tool(ToolRegistry& tools, jobs::JobService& service,
                            http::BlockingExecutor blocking, model::RequestLimits limits);

}  // namespace kforge::frontends::mcp
