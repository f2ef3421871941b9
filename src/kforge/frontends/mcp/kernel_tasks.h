// The tasks extension `io.modelcontextprotocol/tasks` (SEP-2663, revision 2026-07-28) for
// kforge's long tool calls, mapped onto durable jobs: a task IS a job, its taskId the job id
// (128 random bits), so a task survives a server restart exactly as the job does, and any
// server of a shared store answers for it.
//
//   tools/call evaluate_kernel | compare_kernels, when the request's
//     _meta clientCapabilities.extensions["io.modelcontextprotocol/tasks"] is present
//     -> {"resultType": "task", taskId, status: "working", createdAt, lastUpdatedAt, ttlMs: null,
//         pollIntervalMs} as soon as the job is accepted (tasks/get already finds it);
//     without the opt-in the call runs synchronously as always.
//   tasks/get {taskId}    -> the task: working (queued or running; statusMessage = the phase),
//                            completed (+ result: exactly the CallToolResult the synchronous
//                            call returns, isError included), cancelled
//   tasks/cancel {taskId} -> ack; cancels the job (idempotent on finished ones)
//   tasks/update {taskId, inputResponses} -> ack (kforge's jobs never ask for input)
// Unknown task ids are -32602; a request without the opt-in gets -32021 (requiredCapabilities
// {extensions: {"io.modelcontextprotocol/tasks": {}}}) before any lookup. ttlMs is null: a task
// lives as long as its job is kept (the store's retention).
//
// Tasks that are not one job's view (batch_compare, run_benchmark_suite: many jobs;
// validate_kernel: the old tool's answer) live in a TaskBook (task_book.h): their ids start with
// "task-", their ttlMs is the book's kKeepFinished, and after a restart the first tasks/get or
// tasks/cancel resumes one that was still working.
#pragma once

#include <memory>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/frontends/mcp/protocol/catalog.h"
#include "kforge/frontends/mcp/protocol/session.h"
#include "kforge/frontends/mcp/task_book.h"
#include "kforge/jobs/job_service.h"
#include "kforge/model/job.h"

namespace kforge::frontends::mcp {

inline constexpr std::string_view kTasksExtension = "io.modelcontextprotocol/tasks";

// Whether the request opted in to tasks (a 2026-07-28 request declaring the extension).
bool wants_task(const RequestContext& ctx);

// Who submits the jobs of a tool call made on `session`. A call that answers with its jobs'
// results itself (`answered_by_call`: not a task) on a session that ends with this process
// (stdio) is the only one that could ever receive them, so its jobs are process-bound
// (jobs::Caller): a restart does not run them for no one. A task's jobs are not: the client
// polls it, from a later process too.
jobs::Caller job_caller(const Session& session, bool answered_by_call);

// The CreateTaskResult of a job just accepted.
Json create_task_result(const model::JobRecord& job);

// The CreateTaskResult of a book task just created.
Json create_task_result(const TaskRecord& task);

// The Task of a job as tasks/get shows it (with `result` once completed).
Json task_of(const model::JobRecord& job, std::string_view protocol_version);

// Declares the extension and serves tasks/get, tasks/update and tasks/cancel. `service` (and
// `book`, when not null: the tasks of batch_compare and run_benchmark_suite) must outlive the
// catalog's use.
Status add_kernel_tasks(Catalog& catalog, jobs::JobService& service,
                        std::shared_ptr<TaskBook> book = nullptr);

}  // namespace kforge::frontends::mcp
