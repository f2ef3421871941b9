#include "kforge/frontends/mcp/kernelbench_tool.h"

#include <fmt/format.h>

#include <memory>

#include "kforge/bench/kernelbench_request.h"
#include "kforge/frontends/mcp/kernel_tasks.h"
#include "kforge/frontends/mcp/kernel_tool_args.h"
#include "kforge/frontends/mcp/kernel_tool_schemas.h"
#include "kforge/frontends/mcp/protocol/tool.h"

namespace kforge::frontends::mcp {
namespace {

namespace kb = bench::kernelbench;
constexpr const char* kKernelbenchToolName = "kernelbench_eval";

struct KernelbenchToolContext {
  jobs::JobService& service;
  http::BlockingExecutor blocking;
  model::RequestLimits limits;
};
using KernelbenchContextPtr = std::shared_ptr<const KernelbenchToolContext>;

ToolResult kernelbench_answer_of(Json answer) {
  const Json all = answer["summary"].value("all", Json::object());
  const std::string text =
      fmt::format("{} sample(s): {} correct, {} flagged, fast_1 {:.3f}", all.value("samples", 0),
                  all.value("correct", 0), all.value("flagged", 0),
                  all.value("fast_p", Json::object()).value("fast_1", 0.0));
  return ToolResult::structured_value(std::move(answer), text);
}

void run_kernelbench_tool(const KernelbenchContextPtr& ctx, const std::shared_ptr<ToolCall>& call) {
  auto request = kb::parse_kernelbench_request(call->arguments(), ctx->limits);
  if (!request.is_ok()) {
    call->finish(ToolResult::error(std::string("Invalid arguments for ") + kKernelbenchToolName +
                                   ": " + request.status().to_string()));
    return;
  }
  auto on_sample = [call](const Json& record, size_t finished, size_t total) {
    call->context().report_progress(
        static_cast<double>(finished), static_cast<double>(total),
        fmt::format("{} (job {}): {}", record.value("file", std::string()),
                    record.value("job_id", Json()).is_string() ? record["job_id"].get<std::string>()
                                                               : std::string(),
                    record.value("correct", false) ? "correct" : "not correct"));
  };
  auto run = kb::KernelbenchRun::start(
      ctx->service, nullptr, std::move(request).value(),
      job_caller(call->context().session(), true), on_sample,
      [call](Json answer) { call->finish(kernelbench_answer_of(std::move(answer))); });
  if (!run.is_ok()) {
    call->finish(
        ToolResult::error(std::string(kKernelbenchToolName) +
                          ": the problems were not accepted: " + run.status().to_string()));
    return;
  }
  std::weak_ptr<kb::KernelbenchRun> weak = *run;
  call->context().on_cancel([ctx, weak] {
    ctx->blocking([weak] {
      if (auto live = weak.lock())
        live->end("cancelled by the MCP client (notifications/cancelled)");
    });
  });
}

Json input_schema(const model::RequestLimits& limits) {
  Json sample = {
      {"type", "object"},
      {"properties",
       {{"sample_id", {{"type", "integer"}, {"minimum", 0}}},
        {"source_code", {{"type", "string"}, {"description", "A KernelBench ModelNew"}}}}},
      {"required", {"sample_id", "source_code"}}};
  Json problem = {
      {"type", "object"},
      {"properties",
       {{"level", {{"type", "integer"}, {"minimum", 0}}},
        {"problem_id", {{"type", "integer"}, {"minimum", 0}}},
        {"name", {{"type", "string"}, {"description", "The problem's file name, 19_ReLU.py"}}},
        {"ref_code",
         {{"type", "string"}, {"description", "The problem: Model, get_inputs, get_init_inputs"}}},
        {"samples",
         {{"type", "array"},
          {"items", sample},
          {"minItems", 1},
          {"maxItems", limits.max_batch_candidates}}}}},
      {"required", {"level", "problem_id", "ref_code", "samples"}}};
  Json samples_kernel_type = kernel_type_schema();
  samples_kernel_type["description"] = "The samples' kernel_type (default torch_cuda)";
  return Json{
      {"type", "object"},
      {"properties",
       {{"problems",
         {{"type", "array"}, {"items", problem}, {"minItems", 1}, {"maxItems", kb::kMaxProblems}}},
        {"kernel_type", samples_kernel_type},
        {"fast_p",
         {{"type", "array"},
          {"items", {{"type", "number"}, {"minimum", 0}}},
          {"description", "More thresholds p for fast_p (0, 1, 2 are always reported)"}}},
        {"device", {{"type", "string"}, {"description", "cpu, cuda:N, gpu (default: a GPU)"}}},
        {"num_correct_trials", {{"type", "integer"}, {"minimum", 1}}},
        {"num_trials", {{"type", "integer"}, {"minimum", 1}}},
        {"timeout", {{"type", "number"}}},
        {"atol", {{"type", "number"}, {"minimum", 0}}},
        {"rtol", {{"type", "number"}, {"minimum", 0}}},
        {"seed", {{"type", "integer"}, {"minimum", 0}}},
        {"timing", {{"type", "object"}}}}},
      {"required", {"problems"}},
      {"additionalProperties", false}};
}

}  // namespace

Status add_kernelbench_tool(ToolRegistry& tools, jobs::JobService& service,
                            http::BlockingExecutor blocking, model::RequestLimits limits) {
  auto ctx = std::make_shared<const KernelbenchToolContext>(
      KernelbenchToolContext{service, std::move(blocking), limits});
  ToolSpec spec;
  spec.name = kKernelbenchToolName;
  spec.title = "Evaluate KernelBench problems and their samples";
  spec.description =
      "Judge generated KernelBench samples (ModelNew) against their problems (Model, "
      "get_inputs, get_init_inputs) with KernelBench's settings (5 correctness trials, 100 "
      "timed), one batch per problem (POST /kernelbench). Returns {batches, samples, summary}: "
      "one record per sample (compiled, correct, reason, runtimes, speedup with its 95% "
      "interval, honesty flags, job_id) and the summary per level (correctness rate, fast_p, "
      "geometric-mean speedup); a flagged sample is never counted as fast. Progress counts "
      "finished samples.";
  spec.input_schema = input_schema(limits);
  spec.normalize_arguments = [](Json arguments) {
    drop_nulls(arguments);
    return arguments;
  };
  spec.annotations = job_tool_annotations();
  spec.long_running = true;
  return tools.add(std::move(spec),
                   [ctx](std::shared_ptr<ToolCall> call) { run_kernelbench_tool(ctx, call); });
}

}  // namespace kforge::frontends::mcp
