#include "kforge/frontends/mcp/batch_tool.h"

#include <fmt/format.h>

#include <memory>

#include "kforge/common/log.h"
#include "kforge/frontends/mcp/kernel_tool_args.h"
#include "kforge/frontends/mcp/tool.h"
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
};
using ContextPtr = std::shared_ptr<const BatchToolContext>;

void run_batch(const ContextPtr& ctx, const std::shared_ptr<ToolCall>& call) {
  auto request = model::parse_batch_request(call->arguments(), ctx->limits);
  if (!request.is_ok()) {
    call->finish(ToolResult::error(std::string("Invalid arguments for ") + kToolName + ": " +
                                   request.status().to_string()));
    return;
  }
  auto batch = jobs::submit_batch(ctx->service, nullptr, std::move(request).value(),
                                  call->context().session().client());
  if (!batch.is_ok()) {
    call->finish(ToolResult::error(std::string(kToolName) +
                                   ": the batch was not accepted: " + batch.status().to_string()));
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
    size_t correct = 0;
    for (const Json& v : views) {
      const Json* exec =
          v.is_object() && v.contains("kernel_exec_result") ? &v["kernel_exec_result"] : nullptr;
      if (exec != nullptr && exec->is_object() && exec->value("correctness", false)) ++correct;
    }
    Json ids = Json::array();
    for (const auto& id : record.job_ids)
      ids.push_back(id);
    call->finish(ToolResult::structured_value(
        {{"batch_id", record.id}, {"jobs", std::move(ids)}, {"results", std::move(views)}},
        fmt::format("batch {}: {} of {} candidate(s) correct", record.id, correct,
                    record.job_ids.size())));
  };
  // The JobService's callbacks keep the watch alive; the cancel hook holds it weakly.
  std::weak_ptr<jobs::BatchWatch> watch =
      jobs::BatchWatch::start(ctx->service, record, std::move(on_job), std::move(on_all));
  call->context().on_cancel([ctx, record, watch] {
    auto w = watch.lock();
    if (!w || !w->end()) return;
    ctx->blocking([ctx, record] {
      for (const auto& id : record.job_ids) {
        Status s = ctx->service.cancel(id, "cancelled by the MCP client (notifications/cancelled)");
        if (!s.is_ok()) KF_LOG_WARN("mcp: cancelling job {} failed: {}", id, s.to_string());
      }
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
  return Json{
      {"type", "object"},
      {"description", what},
      {"properties",
       {{"source_code", {{"type", "string"}}},
        {"kernel_type",
         {{"type", "string"}, {"description", "torch, torch_cuda, triton, cuda or multi_kernel"}}},
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
                      http::BlockingExecutor blocking, model::RequestLimits limits) {
  auto ctx = std::make_shared<const BatchToolContext>(
      BatchToolContext{service, std::move(blocking), limits});
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
