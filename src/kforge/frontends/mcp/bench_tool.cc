#include "kforge/frontends/mcp/bench_tool.h"

#include <fmt/format.h>

#include <memory>

#include "kforge/bench/bench_run.h"
#include "kforge/frontends/mcp/tool.h"

namespace kforge::frontends::mcp {
namespace {

struct BenchToolContext {
  jobs::JobService& service;
  http::BlockingExecutor blocking;
  bench::BenchPolicy policy;
};
using ContextPtr = std::shared_ptr<const BenchToolContext>;

constexpr const char* kToolName = "run_benchmark_suite";

void run_suite(const ContextPtr& ctx, const std::shared_ptr<ToolCall>& call) {
  auto request = bench::parse_bench_request(call->arguments(), ctx->policy);
  if (!request.is_ok()) {
    call->finish(ToolResult::error(std::string("Invalid arguments for ") + kToolName + ": " +
                                   request.status().to_string()));
    return;
  }
  auto plan = bench::plan_bench(request->options, ctx->service.health());
  if (!plan.is_ok()) {
    call->finish(ToolResult::error(std::string(kToolName) + ": " + plan.status().to_string()));
    return;
  }
  RequestContext& rc = call->context();
  const double total = static_cast<double>(plan->jobs.size());
  rc.report_progress(0, total,
                     fmt::format("bench: {} job(s) on {}", plan->jobs.size(), plan->device));
  auto run = bench::BenchRun::start(
      ctx->service, ctx->blocking, std::move(plan).value(), rc.session().client(),
      [call, total](const bench::BenchProgress& p) {
        call->context().report_progress(p.done, total, p.message);
      },
      [call, request = std::move(request).value()](StatusOr<Json> report) {
        if (!report.is_ok()) {
          call->finish(
              ToolResult::error(std::string(kToolName) + ": " + report.status().to_string()));
          return;
        }
        auto answer = bench::bench_answer(*report, request);
        if (!answer.is_ok()) {
          call->finish(
              ToolResult::error(std::string(kToolName) + ": " + answer.status().to_string()));
          return;
        }
        call->finish(
            ToolResult::structured_value(std::move(answer).value(), summarize_bench(*report)));
      });
  rc.on_cancel([run] { run->cancel("cancelled by the MCP client (notifications/cancelled)"); });
}

Json output_schema() {
  return Json{{"type", "object"},
              {"properties",
               {{"report", {{"type", "object"}}},
                {"files", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
                {"out_dir", {{"type", "string"}}}}},
              {"required", {"report", "files"}}};
}

}  // namespace

std::string summarize_bench(const Json& report) {
  std::string text;
  for (const auto& op : report.value("ops", Json::array())) {
    const Json best = op.value("best", Json::object());
    if (!text.empty()) text += "; ";
    text += op.value("op", "?") + ": ";
    if (best.value("kernel", Json()).is_string()) {
      const Json speedup = best.value("speedup", Json());
      text += best["kernel"].get<std::string>() +
              (speedup.is_number() ? fmt::format(", {:.2f}x vs torch", speedup.get<double>())
                                   : std::string());
    } else {
      text += "no version selected";
    }
    text += fmt::format(" ({}/{} correct)", best.value("correct_versions", 0),
                        best.value("versions", 0));
  }
  if (report.value("interpreter", false)) text += " [cpu device: interpreter timings]";
  return text;
}

Status add_bench_tool(ToolRegistry& tools, jobs::JobService& service,
                      http::BlockingExecutor blocking, bench::BenchPolicy policy) {
  const bool local = policy.allow_local_paths;
  auto ctx = std::make_shared<const BenchToolContext>(
      BenchToolContext{service, std::move(blocking), std::move(policy)});
  ToolSpec spec;
  spec.name = kToolName;
  spec.title = "Run the multi-op benchmark suite";
  spec.description =
      "For each op in order (add, softmax, gelu, layer_norm, mha): check its four Triton "
      "versions (v1_baseline, v2_tiling, v3_coalesced, v4_optimized; the kforge kernel library's, "
      "or yours with 'kernels'" +
      std::string(local ? " or 'kernels_dir'" : "") +
      ") against the torch reference at each size, time them with torch and torch.compile "
      "(runs per size, mean and median), pick the best correct version and report its speedup "
      "and % of the measured peak. Returns the report and the development logs "
      "(<op>_log.md, Phase 1-4; log_lang 'ko' for the Korean headings), an SVG chart per op "
      "and summary.md. Failing versions are reported with their error and excluded. Takes "
      "minutes on a GPU; progress notifications follow each job.";
  spec.input_schema = bench::bench_request_schema(local);
  spec.output_schema = output_schema();
  spec.annotations = job_tool_annotations();
  spec.long_running = true;
  // Handlers run on the blocking executor: planning may read files and ask for health().
  return tools.add(std::move(spec),
                   [ctx](std::shared_ptr<ToolCall> call) { run_suite(ctx, call); });
}

}  // namespace kforge::frontends::mcp
