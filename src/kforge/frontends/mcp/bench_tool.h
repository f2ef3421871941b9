// The MCP tool `run_benchmark_suite`: the multi-op pipeline of `kforge bench` (docs/bench.md)
// on the server's JobService. Arguments are the body of POST /bench (bench/bench_request.h);
// the result's structuredContent is {report, files} (the Markdown logs, SVG charts and
// summary), after a one-line summary per op. With a progressToken, a progress notification
// follows every finished job (progress = jobs done, total = jobs planned). A bench whose
// versions fail is a result (they are reported in the logs); isError means no report could
// be made (bad arguments, an unknown device, a refused submit, a cancelled bench).
// notifications/cancelled cancels the bench's jobs.
//
// With a TaskBook, a 2026-07-28 call that opts in to tasks (kernel_tasks.h) answers at once
// with a task (task_book.h) whose result is that same answer. The task's record keeps the
// arguments (with the device the plan picked) and each job id as it is submitted, so after a
// restart the bench is planned again, waits for the jobs it had submitted and submits the
// rest; tasks/cancel stops it (the task ends cancelled).
//
// Example:
//   KF_RETURN_IF_ERROR(add_bench_tool(catalog.tools, service, executor, policy));
#pragma once

#include <memory>

#include "kforge/bench/bench_request.h"
#include "kforge/common/status.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/mcp/protocol/tool_registry.h"
#include "kforge/frontends/mcp/task_book.h"
#include "kforge/jobs/job_service.h"

namespace kforge::frontends::mcp {

// `service` and the pool behind `blocking` must outlive every call. `policy.allow_local_paths`
// adds kernels_dir/out_dir (for `kforge mcp` on stdio, whose user owns the files).
Status add_bench_tool(ToolRegistry& tools, jobs::JobService& service,
                      http::BlockingExecutor blocking, bench::BenchPolicy policy,
                      std::shared_ptr<TaskBook> book = nullptr);

// One line per op of a bench report: "softmax: v4_optimized, 1.35x vs torch (4/4 correct)";
// a tiny speedup keeps two significant digits ("0.0021x", bench::format_speedup).
std::string summarize_bench(const Json& report);

}  // namespace kforge::frontends::mcp
