#include "kforge/frontends/mcp/workbench_tools.h"

#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <utility>

#include "kforge/common/log.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/mcp/session_principal.h"

namespace kforge::frontends::mcp {
namespace {

using WbTool = workbench::Tool;

constexpr const char* kTestInputDoc =
    "Python code that builds the inputs; it runs in the job (never in the server) with `torch` "
    "and `DEVICE` ('cuda' on a GPU job, 'cpu' on the cpu device) defined. Define `args` (list "
    "of positional arguments) and optionally `kwargs` (dict), e.g. \"x = torch.randn(4096, "
    "device=DEVICE)\\nargs = [x]\". For several sizes define a literal `sizes = [...]` and "
    "`make_inputs(size)` returning args or (args, kwargs): each size is its own job and row. "
    "Inputs are drawn fresh for every correctness trial under the server's seed.";
constexpr const char* kReferenceDoc =
    "Python code defining `reference(*args, **kwargs)`: the torch computation the kernel must "
    "match, e.g. \"import torch\\ndef reference(x):\\n    return torch.softmax(x, dim=-1)\".";
constexpr const char* kKernelDoc =
    "The whole kernel file (imports, @triton.jit kernels and `solve(*args, **kwargs)` returning "
    "the output tensor(s)). Given: the stateless form, run on this code instead of the "
    "session's latest version (allowed in every state; no version is stored).";

Json prop(const char* type, const std::string& description) {
  return Json{{"type", type}, {"description", description}};
}

// An optional argument. null still means "not given", as the Triton-kernel server accepted,
// but the schema names one type (multi-type fields such as ["string", "null"] fail strict
// clients): drop_nulls removes null arguments before validation.
Json optional_prop(const char* type, const std::string& description) {
  return Json{{"type", type}, {"description", description + " (null: not given)"}};
}

Json drop_nulls(Json arguments) {
  for (auto it = arguments.begin(); it != arguments.end();) {
    it = it->is_null() ? arguments.erase(it) : std::next(it);
  }
  return arguments;
}

Json schema(Json properties, const std::vector<std::string>& required = {}) {
  properties["session_id"] = optional_prop(
      "string",
      "Work on this workbench session (wb_...) instead of the one this MCP session uses; it "
      "becomes this MCP session's session (see resume_session).");
  Json s = {
      {"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) s["required"] = required;
  return s;
}

Json execution_props(bool with_reference, bool timing, bool tolerances, const char* code_key) {
  Json p = {{"test_input_code", prop("string", kTestInputDoc)},
            {code_key, optional_prop("string", kKernelDoc)},
            {"entry_function",
             optional_prop("string", "The function of the kernel file to call (default solve).")}};
  if (std::string(code_key) != "code") {
    p["code"] = optional_prop("string", "Same as " + std::string(code_key) + ".");
  }
  if (with_reference) p["reference_code"] = optional_prop("string", kReferenceDoc);
  if (tolerances) {
    p["rtol"] = optional_prop("number",
                              "Relative tolerance (default: kforge's for the output dtype; "
                              "every answer shows the one used).");
    p["atol"] = optional_prop("number", "Absolute tolerance (default: kforge's for the dtype).");
  }
  p["trials"] = Json{{"type", "integer"},
                     {"minimum", 1},
                     {"maximum", 100},
                     {"description", "Correctness trials, each with fresh inputs."}};
  if (timing) {
    p["warmup"] = Json{{"type", "integer"},
                       {"minimum", 0},
                       {"maximum", 10000},
                       {"description", "Warm-up calls before timing (default 3 and 25 ms)."}};
    p["rep"] = Json{{"type", "integer"},
                    {"minimum", 1},
                    {"maximum", 10000},
                    {"description",
                     "At most this many timed trials (default 100; fewer when "
                     "the statistics are stable, 0.5 % relative error)."}};
  }
  return p;
}

struct Described {
  const char* title;
  const char* description;
};

Described describe(WbTool tool) {
  switch (tool) {
    case WbTool::kGetOverview:
      return {"Workbench overview",
              "The Triton workbench's whole process: states (start, write, evaluation, end), the "
              "write-run-validate-benchmark loop, the rules (at least 3 versions, versions never "
              "overwritten), what test_input_code and reference_code must define, and what to do "
              "next. Any state."};
    case WbTool::kGetTritonSyntax:
      return {"Triton syntax reference",
              "A Triton 3.x reference: tl functions, program ids, masking, constexprs, "
              "@triton.autotune, common errors and their fixes. Any state."};
    case WbTool::kGetTorchOpInfo:
      return {"PyTorch op information",
              "What an op computes and how to write it: definition, shapes and dtypes, memory- "
              "or compute-bound, bytes and FLOPs per call, pitfalls, optimisations, a "
              "reference_code and a test_input_code ready for validate_correctness. Ops: "
              "vector_add, vector_mul, relu, gelu, softmax, layer_norm, matmul, dropout, "
              "attention, cross_entropy, sum, mean. Without op_name: the list. Any state."};
    case WbTool::kGetKernelTemplate:
      return {"Kernel template",
              "A complete, tested Triton kernel for a pattern (elementwise, reduction, matmul, "
              "fused, attention) with its solve entry point, test inputs and reference. Any "
              "state."};
    case WbTool::kCheckGpuStatus:
      return {"Device status",
              "The server's devices (GPUs and cpu): model, memory, busy/queued jobs, utilisation "
              "and measured peak bandwidth, and which one this session's jobs run on. Any state."};
    case WbTool::kGetCurrentStatus:
      return {"Session status",
              "This session: id, kernel, state, every version with its correctness and time, "
              "what blocks the end, the last error, context use and the next step. Any state."};
    case WbTool::kCheckContextUsage:
      return {"Context usage",
              "Estimated tokens this session's tool calls put into the context, of the budget "
              "(default 128k); past 70 % the server writes docs/summarization.md and asks for a "
              "new session. Any state."};
    case WbTool::kListSessions:
      return {"List workbench sessions",
              "The recent workbench sessions (id, kernel, state, workspace), to resume one. Any "
              "state."};
    case WbTool::kResumeSession:
      return {"Resume a workbench session",
              "Continue an existing session (after a new chat, a context summary or a server "
              "restart) in this MCP session: returns its summary and next step."};
    case WbTool::kSetKernelName:
      return {"Name the kernel",
              "Names this session's kernel (files kernel/<name>_v<N>.py, log/<name>_log.md) and "
              "moves start -> write. Optional: min_versions, context_budget_tokens, device; "
              "new_session=true starts a fresh session (from any state)."};
    case WbTool::kWriteTestCode:
      return {"Store test code",
              "Stores your test script as tests/test_<name>.py in the workspace (the server "
              "never runs it). States write, evaluation."};
    case WbTool::kWriteKernelCode:
      return {"Write a kernel version",
              "Stores the kernel file as the next version (kernel/<name>_v<N>.py, never "
              "overwritten) and moves write -> evaluation. The file must define solve(*args, "
              "**kwargs) returning the output. The answer has optimisation guidance for the op "
              "and the last benchmark. State write."};
    case WbTool::kForceTransitionToWrite:
      return {"Back to write",
              "Moves the session to write from any state (to write another version)."};
    case WbTool::kRunTritonKernel:
      return {"Run the kernel",
              "Runs the latest version (or `code`) on test_input_code's inputs as a kforge job "
              "(isolated process; Triton interpreter on the cpu device): compiles, runs, checks "
              "its outputs are written and deterministic. States write, evaluation (stateless "
              "form: any state)."};
    case WbTool::kValidateCorrectness:
      return {"Validate against torch",
              "Checks the latest version (or `kernel_code`) against reference_code on "
              "test_input_code's inputs: several trials with fresh seeded inputs per size, dtype "
              "tolerances, max errors and the first mismatch. A failure in evaluation moves the "
              "session back to write. States write, evaluation (stateless form: any state)."};
    case WbTool::kMeasureKernelTime:
      return {"Time the kernel",
              "Times the latest version (or `kernel_code`) per input size: warm-up, L2 flush, "
              "trials until stable; median, mean, min, max. States write, evaluation (stateless "
              "form: any state)."};
    case WbTool::kBenchmarkKernel:
      return {"Benchmark against torch",
              "Checks and times the latest version (or `kernel_code`) against reference_code per "
              "input size: speedup = torch median / kernel median, GB/s, TFLOP/s and % of the "
              "device's measured peak when the op's bytes/FLOPs are known, and advice for the "
              "next version. States write, evaluation (stateless form: any state)."};
    case WbTool::kGetBestKernel:
      return {"Best kernel",
              "Ends the session once at least min_versions (default 3) versions are written and "
              "each evaluated: returns the fastest correct version with its numbers and source. "
              "States evaluation, end."};
  }
  return {"", ""};
}

}  // namespace

std::string workbench_instructions() {
  return " The Triton workbench tools guide writing a Triton kernel for a PyTorch op: start with "
         "get_overview, then set_kernel_name, write_kernel_code, validate_correctness, "
         "benchmark_kernel and, after at least 3 evaluated versions, get_best_kernel; every "
         "answer ends with the next step. Versions, tests and logs are files in the session's "
         "workspace; resume_session(session_id) continues a session in a new conversation.";
}

Json workbench_tool_schema(WbTool tool) {
  switch (tool) {
    case WbTool::kGetTorchOpInfo:
      return schema({{"op_name", optional_prop("string", "The op, e.g. softmax or vector_add.")}});
    case WbTool::kGetKernelTemplate:
      return schema({{"pattern", optional_prop("string",
                                               "elementwise (default), reduction, matmul, fused "
                                               "or attention.")}});
    case WbTool::kResumeSession:
      return schema({}, {"session_id"});
    case WbTool::kSetKernelName:
      return schema(
          {{"name", prop("string", "The kernel's name, e.g. softmax (letters, digits, _).")},
           {"new_session", optional_prop("boolean", "Start a new session for it.")},
           {"min_versions", Json{{"type", "integer"},
                                 {"minimum", 1},
                                 {"maximum", 20},
                                 {"description", "Versions needed before the end (default 3)."}}},
           {"context_budget_tokens",
            Json{{"type", "integer"},
                 {"minimum", 1000},
                 {"description", "The agent's context budget (default 128000)."}}},
           {"device", optional_prop("string", "Device for the jobs: cpu, cuda:0, ...")}},
          {"name"});
    case WbTool::kWriteTestCode:
      return schema({{"code", optional_prop("string", "The test code to store.")},
                     {"test_code", optional_prop("string", "Same as code (older name).")}});
    case WbTool::kWriteKernelCode:
      return schema({{"code", prop("string",
                                   "The whole kernel file: imports, @triton.jit kernels and "
                                   "solve(*args, **kwargs) returning the output.")}},
                    {"code"});
    case WbTool::kRunTritonKernel:
      return schema(execution_props(false, false, false, "code"), {"test_input_code"});
    case WbTool::kValidateCorrectness:
      return schema(execution_props(true, false, true, "kernel_code"), {"test_input_code"});
    case WbTool::kMeasureKernelTime:
      return schema(execution_props(false, true, false, "kernel_code"), {"test_input_code"});
    case WbTool::kBenchmarkKernel:
      return schema(execution_props(true, true, true, "kernel_code"), {"test_input_code"});
    default:
      return schema(Json::object());
  }
}

namespace {

ToolResult to_tool_result(workbench::Reply reply) {
  ToolResult r;
  r.content.push_back(Json{{"type", "text"}, {"text", std::move(reply.text)}});
  r.structured = std::move(reply.structured);
  r.is_error = reply.is_error;
  return r;
}

Json text_message(std::string text) {
  return Json{{"role", "user"}, {"content", {{"type", "text"}, {"text", std::move(text)}}}};
}

Status add_resources(ResourceRegistry& resources, const workbench::Knowledge& knowledge) {
  const std::pair<const char*, const char*> docs[] = {
      {"knowledge/overview.md", "The workbench workflow"},
      {"knowledge/triton_syntax.md", "Triton 3.x syntax reference"},
      {"knowledge/torch_ops.json", "PyTorch ops: definitions, bounds, formulas, references"},
      {"knowledge/templates/templates.json", "Kernel templates: files, tests, references"},
  };
  for (const auto& [path, title] : docs) {
    const std::string mime =
        std::string(path).ends_with(".json") ? "application/json" : "text/markdown";
    const std::string file = path;
    KF_RETURN_IF_ERROR(resources.add(
        ResourceSpec{"kforge://" + file, file.substr(file.rfind('/') + 1), title,
                     std::string(title) + " (the workbench's knowledge base)", mime},
        [&knowledge, file, mime](const std::string& uri, const UriVariables&) -> StatusOr<Json> {
          auto text = knowledge.file(file);
          if (!text) return not_found(file + " is not embedded");
          return Json::array({{{"uri", uri}, {"mimeType", mime}, {"text", std::string(*text)}}});
        }));
  }
  for (const auto& t : knowledge.templates()) {
    const std::string pattern = t.pattern;
    KF_RETURN_IF_ERROR(resources.add(
        ResourceSpec{"kforge://templates/" + pattern + ".py", pattern + ".py",
                     "Template: " + t.title, t.description, "text/x-python"},
        [&knowledge, pattern](const std::string& uri, const UriVariables&) -> StatusOr<Json> {
          const workbench::KernelTemplate* kt = knowledge.find_template(pattern);
          if (kt == nullptr) return not_found("no template " + pattern);
          return Json::array({{{"uri", uri}, {"mimeType", "text/x-python"}, {"text", kt->source}}});
        }));
  }
  return Status::ok();
}

Status add_prompts(PromptRegistry& prompts, const workbench::Knowledge& knowledge) {
  std::string ops;
  for (const auto& name : knowledge.op_names())
    ops += (ops.empty() ? "" : ", ") + name;
  KF_RETURN_IF_ERROR(prompts.add(
      PromptSpec{"convert_torch_op_to_triton",
                 "Convert a PyTorch op to Triton",
                 "Walks an agent through the workbench to turn a torch op into a fast, "
                 "validated Triton kernel.",
                 {{"op_name", "The op (e.g. softmax; known: " + ops + ")", true},
                  {"target", "What 'fast' means here (default: beat torch)", false}}},
      [](const std::map<std::string, std::string>& args) -> StatusOr<Json> {
        const std::string op = args.at("op_name");
        const std::string target =
            args.count("target") != 0 ? args.at("target") : "faster than torch";
        return Json{
            {"description", "Convert " + op + " to Triton with the kforge workbench"},
            {"messages",
             Json::array({text_message(fmt::format(
                 "Convert the PyTorch op `{0}` into a Triton kernel that is correct and {1}, "
                 "using the kforge workbench tools.\n\n"
                 "1. get_overview() once, then get_torch_op_info(\"{0}\"), "
                 "get_kernel_template() for the closest pattern and check_gpu_status().\n"
                 "2. set_kernel_name(\"{0}\").\n"
                 "3. write_kernel_code(code): v1, a simple correct kernel with solve(*args, "
                 "**kwargs) returning the output.\n"
                 "4. validate_correctness(reference_code, test_input_code) — the op info has "
                 "both; fix and rewrite until it passes.\n"
                 "5. benchmark_kernel(test_input_code, reference_code) for the speedup per size.\n"
                 "6. force_transition_to_write() and write the next version with one "
                 "optimisation from the guidance; validate and benchmark each.\n"
                 "7. After at least 3 evaluated versions, get_best_kernel().\n"
                 "Watch the `Next:` line of every answer, and if an answer says the context is "
                 "over 70 %, continue in a new chat with resume_session.",
                 op, target))})}};
      }));
  return prompts.add(
      PromptSpec{"resume_workbench_session",
                 "Resume a workbench session",
                 "Continue a kernel-writing session in a new conversation.",
                 {{"session_id", "The session (wb_...)", true}}},
      [](const std::map<std::string, std::string>& args) -> StatusOr<Json> {
        return Json{
            {"messages", Json::array({text_message(
                             "Continue the kforge workbench session " + args.at("session_id") +
                             ": call resume_session(session_id=\"" + args.at("session_id") +
                             "\"), read its summary, and follow its next step.")})}};
      });
}

// Cancels the jobs of a call when its request is cancelled (jobs may start after the cancel).
class CallJobs {
 public:
  // Returns false if the call was already cancelled (the caller cancels the job itself).
  bool add(const std::string& job_id) {
    MutexLock lock(mu_);
    if (cancelled_) return false;
    jobs_.push_back(job_id);
    return true;
  }
  std::vector<std::string> cancel() {
    MutexLock lock(mu_);
    cancelled_ = true;
    return std::move(jobs_);
  }

 private:
  Mutex mu_;
  bool cancelled_ GUARDED_BY(mu_) = false;
  std::vector<std::string> jobs_ GUARDED_BY(mu_);
};

}  // namespace

Status add_workbench_tools(Catalog& catalog, workbench::Workbench& workbench,
                           jobs::JobService& service, http::BlockingExecutor blocking) {
  // One executor shared by every tool's handler (and the cancellations they queue).
  auto executor = std::make_shared<const http::BlockingExecutor>(std::move(blocking));
  for (WbTool tool : workbench::all_tools()) {
    const Described d = describe(tool);
    ToolSpec spec;
    spec.name = std::string(workbench::tool_name(tool));
    spec.title = d.title;
    spec.description = d.description;
    spec.input_schema = workbench_tool_schema(tool);
    spec.normalize_arguments = drop_nulls;
    const bool read_only = tool == WbTool::kGetOverview || tool == WbTool::kGetTritonSyntax ||
                           tool == WbTool::kGetTorchOpInfo || tool == WbTool::kGetKernelTemplate ||
                           tool == WbTool::kCheckGpuStatus || tool == WbTool::kListSessions;
    spec.annotations = Json{{"readOnlyHint", read_only},
                            {"destructiveHint", false},
                            {"idempotentHint", read_only},
                            {"openWorldHint", false}};
    spec.long_running = workbench::is_execution_tool(tool);
    KF_RETURN_IF_ERROR(catalog.tools.add(
        std::move(spec), [&workbench, &service, executor, tool](std::shared_ptr<ToolCall> call) {
          RequestContext& rc = call->context();
          workbench::Caller caller;
          caller.client = rc.session().id();
          caller.client_name = rc.session().client_name();
          caller.submitter = rc.session().client();
          caller.principal = principal_of(rc.session());
          // Its calls answer themselves (never tasks): on stdio only this process could.
          caller.process_bound = rc.session().ends_with_process();
          if (workbench::is_execution_tool(tool)) {
            auto jobs = std::make_shared<CallJobs>();
            auto started = std::make_shared<std::atomic<int>>(0);
            auto cancel_job = [&service, executor](const std::string& id) {
              (*executor)([&service, id] {
                Status s = service.cancel(id, "cancelled by the MCP client");
                if (!s.is_ok()) KF_LOG_WARN("workbench: cancelling job {}: {}", id, s.message());
              });
            };
            rc.on_cancel([jobs, cancel_job] {
              for (const auto& id : jobs->cancel())
                cancel_job(id);
            });
            caller.job_started = [call, jobs, started, cancel_job](const std::string& id,
                                                                   const std::string& what) {
              if (!jobs->add(id)) cancel_job(id);
              const int n = ++*started;
              call->context().report_progress(n, std::nullopt,
                                              fmt::format("job {} started: {}", id, what),
                                              Json{{"kforge/job_id", id}});
            };
          }
          workbench.call(caller, tool, call->arguments(), [call](workbench::Reply reply) {
            call->finish(to_tool_result(std::move(reply)));
          });
        }));
  }
  KF_RETURN_IF_ERROR(add_resources(catalog.resources, workbench.knowledge()));
  return add_prompts(catalog.prompts, workbench.knowledge());
}

}  // namespace kforge::frontends::mcp
