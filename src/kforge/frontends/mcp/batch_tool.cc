#include "kforge/frontends/mcp/batch_tool.h"

#include <fmt/format.h>

#include <memory>

#include "kforge/common/log.h"
#include "kforge/frontends/mcp/kernel_tasks.h"
#include "kforge/frontends/mcp/kernel_tool_args.h"
#include "kforge/frontends/mcp/kernel_tool_schemas.h"
#include "kforge/frontends/mcp/protocol/modern.h"
#include "kforge/frontends/mcp/protocol/tool.h"
#include "kforge/frontends/mcp/session_principal.h"
#include "kforge/jobs/batch.h"
#include "kforge/jobs/job_view.h"
#include "kforge/model/batch.h"

namespace kforge::frontends::mcp {
namespace {

constexpr const char* kToolName = "batch_compare";

struct BatchToolContext {
  jobs::JobService& service;
  http::BlockingExecutor blocking;
  model::RequestLimits limits;
  std::shared_ptr<TaskBook> book;  // null: no tasks
};
using ContextPtr = std::shared_ptr<const BatchToolContext>;

// The answer once every candidate has finished: {batch_id, jobs, results} after a summary.
ToolResult batch_result(const jobs::BatchRecord& record, Json views) {
  size_t correct = 0;
  for (const Json& v : views) {
    const Json* exec =
        v.is_object() && v.contains("kernel_exec_result") ? &v["kernel_exec_result"] : nullptr;
    if (exec != nullptr && exec->is_object() && exec->value("correctness", false)) ++correct;
  }
  Json ids = Json::array();
  for (const auto& id : record.job_ids)
    ids.push_back(id);
  return ToolResult::structured_value(
      {{"batch_id", record.id}, {"jobs", std::move(ids)}, {"results", std::move(views)}},
      fmt::format("batch {}: {} of {} candidate(s) correct", record.id, correct,
                  record.job_ids.size()));
}

void cancel_jobs(jobs::JobService& service, const jobs::BatchRecord& record,
                 const std::string& reason) {
  for (const auto& id : record.job_ids) {
    Status s = service.cancel(id, reason);
    if (!s.is_ok()) KF_LOG_WARN("mcp: cancelling job {} failed: {}", id, s.to_string());
  }
}

// Watches the jobs of a book task (task_book.h): its statusMessage counts the finished
// candidates, its result is the synchronous call's answer. Runs at creation and on resume.
StatusOr<std::function<void()>> start_batch_task(const ContextPtr& ctx, const TaskRecord& task) {
  jobs::BatchRecord record;
  record.id = task.state.value("batch_id", std::string());
  for (const Json& id : task.jobs) {
    if (!id.is_string()) return internal_error("task " + task.id + ": a job id is not a string");
    record.job_ids.push_back(id.get<std::string>());
  }
  std::shared_ptr<TaskBook> book = ctx->book;
  const std::string task_id = task.id;
  const size_t total = record.job_ids.size();
  auto on_job = [ctx, book, task_id, total](size_t index, const model::JobRecord& job, const Json&,
                                            size_t finished) {
    const std::string message =
        fmt::format("{} of {} candidate(s) finished; candidate {} (job {}): {}", finished, total,
                    index, job.id, model::to_string(job.state));
    ctx->blocking([book, task_id, finished, message] {
      Status s = book->update(task_id, [&](TaskRecord& t) {
        if (t.state.value("finished", size_t{0}) > finished) return;  // a later one came first
        t.state["finished"] = finished;
        t.message = message;
      });
      if (!s.is_ok()) KF_LOG_WARN("mcp: task {}: {}", task_id, s.to_string());
    });
  };
  auto on_all = [ctx, book, task_id, record](Json views) {
    ctx->blocking([book, task_id, record, views = std::move(views)]() mutable {
      const ToolResult result = batch_result(record, std::move(views));
      Status s = book->update(task_id, [&](TaskRecord& t) {
        t.status = "completed";
        t.message = result.content.empty() ? std::string("finished")
                                           : result.content[0].value("text", "finished");
        t.result = result.to_json(modern::kVersion);
      });
      if (!s.is_ok()) KF_LOG_WARN("mcp: task {}: {}", task_id, s.to_string());
      book->ended(task_id);
    });
  };
  std::weak_ptr<jobs::BatchWatch> watch =
      jobs::BatchWatch::start(ctx->service, record, std::move(on_job), std::move(on_all));
  // Held by the book: weak references only (the context holds the book).
  std::weak_ptr<const BatchToolContext> weak_ctx = ctx;
  return std::function<void()>([weak_ctx, task_id, record, watch] {
    auto live = weak_ctx.lock();
    auto w = watch.lock();
    if (!live || !w || !w->end()) return;  // the answer is being written
    const std::string reason = "cancelled by the MCP client (tasks/cancel)";
    cancel_jobs(live->service, record, reason);
    Status s = live->book->update(task_id, [&](TaskRecord& t) {
      t.status = "cancelled";
      t.message = reason;
    });
    if (!s.is_ok()) KF_LOG_WARN("mcp: task {}: {}", task_id, s.to_string());
    live->book->ended(task_id);
  });
}

// Answers a batch just submitted with a task, or (when the task could not be made) with the
// error, its jobs cancelled.
void answer_with_task(const ContextPtr& ctx, const std::shared_ptr<ToolCall>& call,
                      const jobs::BatchRecord& record) {
  const Session& session = call->context().session();
  TaskRecord task =
      TaskRecord::fresh(kToolName, session.client(), principal_of(session).name, call->arguments());
  for (const auto& id : record.job_ids)
    task.jobs.push_back(id);
  task.state = {{"batch_id", record.id}, {"finished", 0}};
  task.message = fmt::format("batch {}: {} candidate(s) queued", record.id, record.job_ids.size());
  if (Status s = ctx->book->create(task); !s.is_ok()) {
    cancel_jobs(ctx->service, record, "the batch's task could not be made: " + s.message());
    call->finish(ToolResult::error(std::string(kToolName) +
                                   ": the task could not be made: " + s.to_string()));
    return;
  }
  call->context().respond(create_task_result(task));
}

void run_batch(const ContextPtr& ctx, const std::shared_ptr<ToolCall>& call) {
  auto request = model::parse_batch_request(call->arguments(), ctx->limits);
  if (!request.is_ok()) {
    call->finish(ToolResult::error(std::string("Invalid arguments for ") + kToolName + ": " +
                                   request.status().to_string()));
    return;
  }
  const bool task = ctx->book != nullptr && wants_task(call->context());
  auto batch = jobs::submit_batch(ctx->service, nullptr, std::move(request).value(),
                                  job_caller(call->context().session(), !task));
  if (!batch.is_ok()) {
    call->finish(ToolResult::error(std::string(kToolName) +
                                   ": the batch was not accepted: " + batch.status().to_string()));
    return;
  }
  if (task) {
    answer_with_task(ctx, call, *batch);
    return;
  }
  const auto total = static_cast<double>(batch->job_ids.size());
  call->context().report_progress(
      0, total, fmt::format("batch {}: {} candidate(s) queued", batch->id, batch->job_ids.size()));
  auto on_job = [call, total](size_t index, const model::JobRecord& job, const Json&,
                              size_t finished) {
    call->context().report_progress(static_cast<double>(finished), total,
                                    fmt::format("candidate {} (job {}) finished: {}", index, job.id,
                                                model::to_string(job.state)));
  };
  const jobs::BatchRecord record = *batch;
  auto on_all = [call, record](Json views) {
    call->finish(batch_result(record, std::move(views)));
  };
  // The JobService's callbacks keep the watch alive; the cancel hook holds it weakly.
  std::weak_ptr<jobs::BatchWatch> watch =
      jobs::BatchWatch::start(ctx->service, record, std::move(on_job), std::move(on_all));
  call->context().on_cancel([ctx, record, watch] {
    auto w = watch.lock();
    if (!w || !w->end()) return;
    ctx->blocking([ctx, record] {
      cancel_jobs(ctx->service, record, "cancelled by the MCP client (notifications/cancelled)");
    });
  });
}

Json normalize(Json arguments) {
  drop_nulls(arguments);
  if (arguments.is_object() && arguments.size() == 1 && arguments.contains("request") &&
      arguments["request"].is_object()) {
    return arguments["request"];
  }
  return arguments;
}

Json kernel_object_schema(const char* what) {
  return Json{{"type", "object"},
              {"description", what},
              {"properties",
               {{"source_code", {{"type", "string"}}},
                {"kernel_type", kernel_type_schema()},
                {"io", {{"type", "object"}}},
                {"metadata", {{"type", "object"}}}}}};
}

Json input_schema(const model::RequestLimits& limits) {
  Json candidates = {
      {"type", "array"},
      {"description", "The candidate kernels (each like ref_kernel), judged on the same inputs"},
      {"items", kernel_object_schema("A candidate kernel")},
      {"minItems", 1},
      {"maxItems", limits.max_batch_candidates}};
  return Json{
      {"type", "object"},
      {"properties",
       {{"ref_kernel",
         kernel_object_schema("The reference kernel (KernelCode: source_code, kernel_type, io)")},
        {"candidates", candidates},
        {"device", {{"type", "string"}, {"description", "cpu, cuda:N, gpu (default: a GPU)"}}},
        {"num_correct_trials", {{"type", "integer"}, {"minimum", 1}}},
        {"num_trials", {{"type", "integer"}, {"minimum", 1}}},
        {"timeout", {{"type", "number"}}},
        {"measure_performance", {{"type", "boolean"}}},
        {"atol", {{"type", "number"}, {"minimum", 0}}},
        {"rtol", {{"type", "number"}, {"minimum", 0}}},
        {"seed", {{"type", "integer"}, {"minimum", 0}}},
        {"num_warmup", {{"type", "integer"}, {"minimum", 0}}},
        {"enable_device_metrics", {{"type", "boolean"}}},
        {"timing", {{"type", "object"}}}}},
      {"required", {"ref_kernel", "candidates"}},
      {"additionalProperties", false}};
}

}  // namespace

Status add_batch_tool(ToolRegistry& tools, jobs::JobService& service,
                      http::BlockingExecutor blocking, model::RequestLimits limits,
                      std::shared_ptr<TaskBook> book) {
  auto ctx = std::make_shared<const BatchToolContext>(
      BatchToolContext{service, std::move(blocking), limits, book});
  if (book) {
    book->set_starter(kToolName,
                      [weak = std::weak_ptr<const BatchToolContext>(ctx)](
                          const TaskRecord& task) -> StatusOr<std::function<void()>> {
                        auto live =
                            weak.lock();  // the book is held by the context: a weak reference back
                        if (!live) return unavailable("the server is shutting down");
                        return start_batch_task(live, task);
                      });
  }
  ToolSpec spec;
  spec.name = kToolName;
  spec.title = "Compare many candidates with one reference";
  spec.description =
      "Judge N candidate kernels against one reference on the same seeded inputs (POST /batch): "
      "each candidate is a compare job of its own (its job id is in 'jobs'; get_job_status "
      "works for each), the reference's outputs and timing are computed once for the batch. "
      "Returns {batch_id, jobs, results}: one compare_kernels result per candidate, in order. "
      "Progress counts finished candidates. Arguments are the compare options plus ref_kernel "
      "and candidates (kernel objects: source_code, kernel_type, io).";
  spec.input_schema = input_schema(limits);
  spec.normalize_arguments = normalize;
  spec.annotations = job_tool_annotations();
  spec.long_running = true;
  return tools.add(std::move(spec),
                   [ctx](std::shared_ptr<ToolCall> call) { run_batch(ctx, call); });
}

}  // namespace kforge::frontends::mcp
