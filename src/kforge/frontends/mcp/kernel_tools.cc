#include "kforge/frontends/mcp/kernel_tools.h"

#include <memory>
#include <optional>

#include "kforge/common/log.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/mcp/kernel_tasks.h"
#include "kforge/frontends/mcp/kernel_tool_args.h"
#include "kforge/frontends/mcp/kernel_tool_results.h"
#include "kforge/frontends/mcp/kernel_tool_schemas.h"
#include "kforge/frontends/mcp/protocol/modern.h"
#include "kforge/frontends/mcp/session_principal.h"
#include "kforge/jobs/job_access.h"

namespace kforge::frontends::mcp {
namespace {

struct Context {
  jobs::JobService& service;
  http::BlockingExecutor blocking;
  KernelToolsOptions options;
};
using ContextPtr = std::shared_ptr<const Context>;

const char* tool_name(KernelTool tool) {
  switch (tool) {
    case KernelTool::kEvaluate:
      return "evaluate_kernel";
    case KernelTool::kCompare:
      return "compare_kernels";
    case KernelTool::kValidate:
      return "validate_kernel";
  }
  return "?";
}

// The subscriptions of one waiting call. The first of {job done, request cancelled} ends the
// wait; subscription ids may arrive after that (they are then dropped at once).
class JobWatch {
 public:
  // Records a subscription; false if the wait already ended (the caller drops it).
  bool add(uint64_t subscription) {
    MutexLock lock(mu_);
    if (ended_) return false;
    subscriptions_.push_back(subscription);
    return true;
  }
  // Ends the wait; returns the subscriptions to drop (only the first call gets them).
  std::optional<std::vector<uint64_t>> end() {
    MutexLock lock(mu_);
    if (ended_) return std::nullopt;
    ended_ = true;
    return std::move(subscriptions_);
  }

 private:
  Mutex mu_;
  bool ended_ GUARDED_BY(mu_) = false;
  std::vector<uint64_t> subscriptions_ GUARDED_BY(mu_);
};

void drop(jobs::JobService& service, const std::optional<std::vector<uint64_t>>& subs) {
  if (!subs) return;
  for (uint64_t s : *subs)
    service.unsubscribe(s);
}

Json job_meta(const std::string& job_id) {
  return Json{{"kforge/job_id", job_id}};
}

// Subscribes to the job's progress and end, and cancels it when the request is cancelled.
void watch_job(const ContextPtr& ctx, const std::shared_ptr<ToolCall>& call,
               const model::JobRecord& job, std::vector<std::string> warnings, bool validate) {
  RequestContext& rc = call->context();
  const std::string id = job.id;
  auto watch = std::make_shared<JobWatch>();
  rc.on_cancel([ctx, watch, id] {
    drop(ctx->service, watch->end());
    ctx->blocking([ctx, id] {
      Status s = ctx->service.cancel(id, "cancelled by the MCP client (notifications/cancelled)");
      if (!s.is_ok()) KF_LOG_WARN("mcp: cancelling job {} failed: {}", id, s.to_string());
    });
  });
  if (rc.has_progress_token()) {
    auto sub = ctx->service.on_progress(id, [call, id](const jobs::JobProgress& p) {
      std::string message = "job " + id + ": " + p.phase;
      if (!p.message.empty()) message += " - " + p.message;
      call->context().report_progress(std::min(99.0, p.fraction * 100.0), 100.0, message,
                                      job_meta(id));
    });
    if (sub.is_ok() && !watch->add(*sub)) ctx->service.unsubscribe(*sub);
  }
  auto done =
      ctx->service.when_done(id, [ctx, call, watch, id, validate, warnings = std::move(warnings)](
                                     const model::JobRecord& finished) {
        drop(ctx->service, watch->end());
        RequestContext& request = call->context();
        request.report_progress(100.0, 100.0, "job " + id + ": finished", job_meta(id));
        request.log(LogLevel::kInfo, "kforge",
                    "job " + id + " " + std::string(model::to_string(finished.state)));
        call->finish(finished_job_result(finished, warnings, validate));
      });
  if (!done.is_ok()) {
    drop(ctx->service, watch->end());
    call->finish(ToolResult::error(call->tool_name() + ": lost track of job " + id + ": " +
                                   done.status().to_string() +
                                   "; call get_job_status with job_id " + id));
    return;
  }
  if (!watch->add(*done)) ctx->service.unsubscribe(*done);
}

// The task of a validate_kernel job (task_book.h): its result is the synchronous answer. Runs
// at creation and when a restart resumes it; a cancel cancels the job.
StatusOr<std::function<void()>> start_validate_task(const ContextPtr& ctx, const TaskRecord& task) {
  if (task.jobs.size() != 1 || !task.jobs[0].is_string()) {
    return internal_error("task " + task.id + " names no job");
  }
  const std::string job_id = task.jobs[0].get<std::string>();
  std::vector<std::string> warnings;
  for (const Json& w : task.state.value("warnings", Json::array()))
    if (w.is_string()) warnings.push_back(w.get<std::string>());
  std::shared_ptr<TaskBook> book = ctx->options.book;
  const std::string task_id = task.id;
  auto done = ctx->service.when_done(
      job_id, [ctx, book, task_id, warnings](const model::JobRecord& finished) {
        ctx->blocking([book, task_id, warnings, finished] {
          const ToolResult result = finished_job_result(finished, warnings, true);
          Status s = book->update(task_id, [&](TaskRecord& t) {
            t.status = "completed";
            t.message = "job " + finished.id + " " + std::string(model::to_string(finished.state));
            t.result = result.to_json(modern::kVersion);
          });
          if (!s.is_ok()) KF_LOG_WARN("mcp: task {}: {}", task_id, s.to_string());
          book->ended(task_id);
        });
      });
  if (!done.is_ok()) return done.status().with_context("job " + job_id);
  std::weak_ptr<const Context> weak = ctx;
  return std::function<void()>([weak, task_id, job_id] {
    auto live = weak.lock();
    if (!live) return;
    const std::string reason = "cancelled by the MCP client (tasks/cancel)";
    Status s = live->options.book->update(task_id, [&](TaskRecord& t) {
      t.status = "cancelled";
      t.message = reason;
    });
    if (!s.is_ok()) KF_LOG_WARN("mcp: task {}: {}", task_id, s.to_string());
    live->options.book->ended(task_id);
    if (Status c = live->service.cancel(job_id, reason); !c.is_ok()) {
      KF_LOG_WARN("mcp: cancelling job {} failed: {}", job_id, c.to_string());
    }
  });
}

void answer_validate_with_task(const ContextPtr& ctx, const std::shared_ptr<ToolCall>& call,
                               const model::JobRecord& job,
                               const std::vector<std::string>& warnings) {
  const Session& session = call->context().session();
  TaskRecord task = TaskRecord::fresh(tool_name(KernelTool::kValidate), session.client(),
                                      principal_of(session).name, call->arguments());
  task.jobs = Json::array({job.id});
  task.state = {{"warnings", warnings}};
  task.message = "job " + job.id + " queued on " + job.device;
  if (Status s = ctx->options.book->create(task); !s.is_ok()) {
    (void)ctx->service.cancel(job.id, "its task could not be made: " + s.message());
    call->finish(ToolResult::error(std::string(task.tool) +
                                   ": the task could not be made: " + s.to_string()));
    return;
  }
  call->context().respond(create_task_result(task));
}

void run_kernel_tool(const ContextPtr& ctx, KernelTool tool,
                     const std::shared_ptr<ToolCall>& call) {
  const char* name = tool_name(tool);
  std::vector<std::string> warnings;
  auto request = job_request_from_arguments(tool, call->arguments(), ctx->options.limits, warnings);
  if (!request.is_ok()) {
    call->finish(ToolResult::error(std::string("Invalid arguments for ") + name + ": " +
                                   request.status().to_string()));
    return;
  }
  RequestContext& rc = call->context();
  // A task (kernel_tasks.h): the client polls tasks/get; the job outlives this exchange.
  const bool job_task = tool != KernelTool::kValidate && wants_task(rc);
  const bool book_task = tool == KernelTool::kValidate && ctx->options.book && wants_task(rc);
  auto job = ctx->service.submit(std::move(request).value(),
                                 job_caller(rc.session(), !job_task && !book_task));
  if (!job.is_ok()) {
    call->finish(ToolResult::error(std::string(name) + ": the job was not accepted: " +
                                   in_argument_terms(tool, job.status()).to_string()));
    return;
  }
  if (job_task) {
    rc.respond(create_task_result(*job));
    return;
  }
  if (book_task) {
    // Its answer differs from the job's view (the old tool's fields): a book task.
    answer_validate_with_task(ctx, call, *job, warnings);
    return;
  }
  rc.report_progress(0.0, 100.0, "job " + job->id + " queued on " + job->device, job_meta(job->id));
  rc.log(LogLevel::kInfo, "kforge",
         std::string(name) + ": job " + job->id + " submitted (device " + job->device + ")");
  watch_job(ctx, call, *job, std::move(warnings), tool == KernelTool::kValidate);
}

void get_job_status(const ContextPtr& ctx, const std::shared_ptr<ToolCall>& call) {
  const std::string id = call->arguments()["job_id"].get<std::string>();
  auto job = jobs::get_visible(ctx->service, id, principal_of(call->context().session()));
  if (!job.is_ok()) {
    // As the old tool did, an unknown id is a normal result with status "not_found" (and so
    // is another principal's job).
    call->finish(job.status().code() == ErrorCode::kNotFound
                     ? job_not_found_result(id)
                     : ToolResult::error("get_job_status: " + job.status().to_string()));
    return;
  }
  call->finish(job_status_result(*job));
}

void get_server_stats(const ContextPtr& ctx, const std::shared_ptr<ToolCall>& call) {
  Json stats = ctx->service.stats();
  // A JobService that cannot produce statistics (an unreachable remote server) says why in
  // `error` instead.
  if (auto error = stats.find("error"); error != stats.end() && error->is_string()) {
    call->finish(ToolResult::error("get_server_stats: " + error->get<std::string>()));
    return;
  }
  Json health = ctx->service.health();
  const model::Principal principal = principal_of(call->context().session());
  jobs::hide_job_ids(stats, principal);
  jobs::hide_job_ids(health, principal);
  call->finish(server_stats_result(stats, health));
}

Json read_only_annotations() {
  return Json{{"readOnlyHint", true}, {"idempotentHint", true}, {"openWorldHint", false}};
}

constexpr const char* kCompareRule =
    " Compare rule: each correctness trial generates one set of inputs and both kernels get "
    "clones. If the candidate declares an io contract, it defines the inputs: the torch "
    "reference's forward receives the candidate's input/inout tensors in declared order, and the "
    "candidate's output/inout tensors are compared with the reference's return value(s). "
    "Otherwise the reference's get_inputs() defines them and both receive the same arguments. "
    "Declared inputs that disagree are an error.";

ToolSpec kernel_spec(KernelTool tool) {
  ToolSpec spec;
  spec.name = tool_name(tool);
  spec.input_schema = kernel_tool_input_schema(tool);
  spec.output_schema = job_view_schema();
  spec.annotations = job_tool_annotations();
  spec.long_running = true;
  spec.normalize_arguments = normalize_arguments;
  switch (tool) {
    case KernelTool::kEvaluate:
      spec.title = "Evaluate a kernel";
      spec.description =
          "Compile, check and time one GPU kernel (Triton, CUDA, PyTorch) in an isolated "
          "process; with reference_kernel_source it is also checked against that reference and "
          "both are timed. Returns the job result: compiled, correctness (with max errors), "
          "runtime statistics in ms (runtime = mean), speedup. A kernel that fails to compile, is "
          "wrong, crashes or times out is a normal result: compiled=false with "
          "compilation_error, or correctness=false with validation_error. On the 'cpu' device "
          "Triton runs in the interpreter and timings are CPU timings. Arguments may also be "
          "wrapped in {\"request\": {...}}." +
          std::string(kCompareRule);
      break;
    case KernelTool::kCompare:
      spec.title = "Compare two kernels";
      spec.description =
          "Check a candidate kernel (custom_kernel_*) against a reference (ref_kernel_*, usually "
          "torch) on the same seeded inputs, then time both: correctness, runtimes in ms and "
          "speedup = reference median / candidate median." +
          std::string(kCompareRule);
      break;
    case KernelTool::kValidate:
      spec.title = "Validate a kernel";
      spec.description =
          "Compile a kernel and check its correctness (against reference_kernel_source when "
          "given), without timing: compiled, validated, compilation_error, validation_error, "
          "compilation_time (s). Faster than evaluate_kernel while iterating on a kernel.";
      break;
  }
  return spec;
}

}  // namespace

const char* kernel_tools_instructions() {
  return "kforge evaluates GPU kernels. Use validate_kernel while iterating (compile + "
         "correctness), compare_kernels or evaluate_kernel with a reference to measure speedup, "
         "get_job_status to poll a job by id (every progress message names it), and "
         "get_server_stats to see the devices. triton and cuda kernels need an io_contract "
         "describing their arguments; torch kernels are KernelBench modules (Model, "
         "get_inputs). Pass device 'cpu' on a machine without a GPU.";
}

Status add_kernel_tools(ToolRegistry& tools, jobs::JobService& service,
                        http::BlockingExecutor blocking, KernelToolsOptions options) {
  auto ctx =
      std::make_shared<const Context>(Context{service, std::move(blocking), std::move(options)});
  if (ctx->options.book) {
    ctx->options.book->set_starter(tool_name(KernelTool::kValidate),
                                   [weak = std::weak_ptr<const Context>(ctx)](
                                       const TaskRecord& task) -> StatusOr<std::function<void()>> {
                                     auto live = weak.lock();  // the context holds the book
                                     if (!live) return unavailable("the server is shutting down");
                                     return start_validate_task(live, task);
                                   });
  }
  for (KernelTool tool : {KernelTool::kEvaluate, KernelTool::kCompare, KernelTool::kValidate}) {
    KF_RETURN_IF_ERROR(tools.add(kernel_spec(tool), [ctx, tool](std::shared_ptr<ToolCall> call) {
      run_kernel_tool(ctx, tool, call);
    }));
  }
  ToolSpec status;
  status.name = "get_job_status";
  status.title = "Job status";
  status.description =
      "The status (submitted, compiling, validating, profiling, completed, failed; 'state' has "
      "kforge's queued/running/success/failed/cancelled) and, once finished, the result of a "
      "job started by evaluate_kernel, compare_kernels or validate_kernel; status 'not_found' "
      "for an unknown id.";
  status.input_schema = job_status_input_schema();
  status.normalize_arguments = normalize_arguments;
  status.output_schema = job_view_schema();
  status.annotations = read_only_annotations();
  KF_RETURN_IF_ERROR(tools.add(
      std::move(status), [ctx](std::shared_ptr<ToolCall> call) { get_job_status(ctx, call); }));
  ToolSpec stats;
  stats.name = "get_server_stats";
  stats.title = "Server statistics";
  stats.description =
      "Server status, GPUs (gpu_available, gpu_count, gpu_info), job_stats, and kforge's queue "
      "depth, jobs by state and each device (cpu, cuda:N) with its workers.";
  stats.input_schema = server_stats_input_schema();
  stats.normalize_arguments = normalize_arguments;
  stats.output_schema = server_stats_schema();
  stats.annotations = read_only_annotations();
  return tools.add(std::move(stats),
                   [ctx](std::shared_ptr<ToolCall> call) { get_server_stats(ctx, call); });
}

}  // namespace kforge::frontends::mcp
