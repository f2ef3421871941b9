#include "kforge/frontends/mcp/bench_tool.h"

#include <fmt/format.h>

#include <memory>

#include "kforge/bench/bench_run.h"
#include "kforge/common/log.h"
#include "kforge/frontends/mcp/kernel_tasks.h"
#include "kforge/frontends/mcp/protocol/modern.h"
#include "kforge/frontends/mcp/protocol/tool.h"
#include "kforge/frontends/mcp/session_principal.h"

namespace kforge::frontends::mcp {
namespace {

struct BenchToolContext {
  jobs::JobService& service;
  http::BlockingExecutor blocking;
  bench::BenchPolicy policy;
  std::shared_ptr<TaskBook> book;  // null: no tasks
};
using ContextPtr = std::shared_ptr<const BenchToolContext>;

constexpr const char* kToolName = "run_benchmark_suite";

// The call's answer for a finished run (or the error that stopped it).
ToolResult suite_result(const StatusOr<Json>& report, const bench::BenchRequest& request) {
  if (!report.is_ok()) {
    return ToolResult::error(std::string(kToolName) + ": " + report.status().to_string());
  }
  auto answer = bench::bench_answer(*report, request);
  if (!answer.is_ok()) {
    return ToolResult::error(std::string(kToolName) + ": " + answer.status().to_string());
  }
  return ToolResult::structured_value(std::move(answer).value(), summarize_bench(*report));
}

void log_if_failed(const std::string& task_id, const Status& s) {
  if (!s.is_ok()) KF_LOG_WARN("mcp: task {}: {}", task_id, s.to_string());
}

// Runs (or resumes: the job ids the record already holds are waited for, not submitted
// again) the bench of a book task (task_book.h). Its statusMessage follows the jobs; its
// result is the synchronous call's answer; a cancel ends it cancelled.
StatusOr<std::function<void()>> start_bench_task(const ContextPtr& ctx, const TaskRecord& task) {
  KF_ASSIGN_OR_RETURN(auto request, bench::parse_bench_request(task.arguments, ctx->policy));
  KF_ASSIGN_OR_RETURN(auto plan, bench::plan_bench(request.options, ctx->service.health()));
  std::shared_ptr<TaskBook> book = ctx->book;
  const std::string task_id = task.id;
  const int total = static_cast<int>(plan.jobs.size());
  bench::BenchResume resume;
  for (const Json& id : task.jobs)
    resume.job_ids.push_back(id.is_string() ? id.get<std::string>() : std::string());
  // On the executor (BenchResume): the id is durable before the run waits for the job.
  resume.on_submitted = [book, task_id](size_t index, const std::string& job_id) {
    log_if_failed(task_id, book->update(task_id, [&](TaskRecord& t) {
      while (t.jobs.size() <= index)
        t.jobs.push_back("");
      t.jobs[index] = job_id;
    }));
  };
  auto progress = [ctx, book, task_id, total](const bench::BenchProgress& p) {
    const std::string message = fmt::format("{} of {} job(s) done; {}", p.done, total, p.message);
    ctx->blocking([book, task_id, done = p.done, message] {
      log_if_failed(task_id, book->update(task_id, [&](TaskRecord& t) {
        if (t.state.value("done", 0) > done) return;  // a later one came first
        t.state["done"] = done;
        t.message = message;
      }));
    });
  };
  auto done = [ctx, book, task_id, request](StatusOr<Json> report) {
    ctx->blocking([book, task_id, request, report = std::move(report)] {
      const bool cancelled = !report.is_ok() && report.status().code() == ErrorCode::kCancelled;
      const ToolResult result = suite_result(report, request);
      log_if_failed(task_id, book->update(task_id, [&](TaskRecord& t) {
        t.status = cancelled ? "cancelled" : "completed";
        t.message = cancelled                ? report.status().message()
                    : result.content.empty() ? std::string("finished")
                                             : result.content[0].value("text", "");
        if (!cancelled) t.result = result.to_json(modern::kVersion);
      }));
      book->ended(task_id);
    });
  };
  auto run = bench::BenchRun::start(ctx->service, ctx->blocking, std::move(plan), task.caller(),
                                    std::move(progress), std::move(done), std::move(resume));
  // Held by the book: a weak reference (the run's callbacks hold the book).
  return std::function<void()>([weak = std::weak_ptr<bench::BenchRun>(run)] {
    if (auto r = weak.lock()) r->cancel("cancelled by the MCP client (tasks/cancel)");
  });
}

// Answers a planned bench with a task, or with the error when the task could not be made.
void answer_with_task(const ContextPtr& ctx, const std::shared_ptr<ToolCall>& call,
                      const bench::BenchPlan& plan) {
  const Session& session = call->context().session();
  TaskRecord task =
      TaskRecord::fresh(kToolName, session.client(), principal_of(session).name, call->arguments());
  task.arguments["device"] = plan.device;  // a resumed run plans on the same device
  task.state = {{"done", 0}};
  task.message = fmt::format("0 of {} job(s) done; bench on {}", plan.jobs.size(), plan.device);
  if (Status s = ctx->book->create(task); !s.is_ok()) {
    call->finish(ToolResult::error(std::string(kToolName) +
                                   ": the task could not be made: " + s.to_string()));
    return;
  }
  call->context().respond(create_task_result(task));
}

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
  if (ctx->book != nullptr && wants_task(call->context())) {
    answer_with_task(ctx, call, *plan);
    return;
  }
  RequestContext& rc = call->context();
  const double total = static_cast<double>(plan->jobs.size());
  rc.report_progress(0, total,
                     fmt::format("bench: {} job(s) on {}", plan->jobs.size(), plan->device));
  auto run = bench::BenchRun::start(
      ctx->service, ctx->blocking, std::move(plan).value(),
      job_caller(rc.session(), /*answered_by_call=*/true),
      [call, total](const bench::BenchProgress& p) {
        call->context().report_progress(p.done, total, p.message);
      },
      [call, request = std::move(request).value()](const StatusOr<Json>& report) {
        call->finish(suite_result(report, request));
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
      text +=
          best["kernel"].get<std::string>() +
          (speedup.is_number() ? ", " + bench::format_speedup(speedup.get<double>()) + " vs torch"
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
                      http::BlockingExecutor blocking, bench::BenchPolicy policy,
                      std::shared_ptr<TaskBook> book) {
  const bool local = policy.allow_local_paths;
  auto ctx = std::make_shared<const BenchToolContext>(
      BenchToolContext{service, std::move(blocking), std::move(policy), book});
  if (book) {
    book->set_starter(kToolName,
                      [weak = std::weak_ptr<const BenchToolContext>(ctx)](
                          const TaskRecord& task) -> StatusOr<std::function<void()>> {
                        auto live =
                            weak.lock();  // the book is held by the context: a weak reference back
                        if (!live) return unavailable("the server is shutting down");
                        return start_bench_task(live, task);
                      });
  }
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
