// The workbench's synchronous tools: information, workflow and the end (CallRunner methods;
// the execution tools are in workbench_exec.cc).
#include <fmt/format.h>

#include "kforge/workbench/call_runner.h"
#include "kforge/workbench/context_meter.h"
#include "kforge/workbench/guidance.h"
#include "kforge/workbench/names.h"
#include "kforge/workbench/narrative.h"
#include "kforge/workbench/workspace.h"

namespace kforge::workbench {
namespace {

Reply text_reply(std::string text, Json structured = Json::object()) {
  return Reply{std::move(text), std::move(structured), false};
}

Reply failure(std::string text, Json structured = Json::object()) {
  return Reply{std::move(text), std::move(structured), true};
}

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i > 0 ? sep : "") + items[i];
  return out;
}

std::string bullet_list(const Json& items) {
  std::string out;
  for (const auto& item : items) {
    if (item.is_string()) {
      out += "- " + item.get<std::string>() + "\n";
    } else if (item.is_object()) {
      out += "- " + item.value("name", "") + ": " + item.value("description", "") + "\n";
    }
  }
  return out;
}

std::string fenced(const std::string& code) {
  return "```python\n" + code + (code.ends_with("\n") ? "" : "\n") + "```\n";
}

}  // namespace

Reply CallRunner::dispatch_locked(Session& s) {
  switch (tool_) {
    case Tool::kGetOverview:
      return overview(s);
    case Tool::kGetTritonSyntax:
      return triton_syntax();
    case Tool::kGetTorchOpInfo:
      return torch_op_info();
    case Tool::kGetKernelTemplate:
      return kernel_template();
    case Tool::kCheckGpuStatus:
      return gpu_status(s);
    case Tool::kGetCurrentStatus:
      return current_status(s);
    case Tool::kCheckContextUsage:
      return context_usage(s);
    case Tool::kListSessions:
      return list_sessions();
    case Tool::kResumeSession:
      return resume(s);
    case Tool::kSetKernelName:
      return set_kernel_name(s);
    case Tool::kWriteTestCode:
      return write_test_code(s);
    case Tool::kWriteKernelCode:
      return write_kernel_code(s);
    case Tool::kForceTransitionToWrite:
      return force_write(s);
    case Tool::kGetBestKernel:
      return best_kernel(s);
    default:
      return failure(std::string(tool_name(tool_)) + " is not a synchronous tool");
  }
}

Reply CallRunner::overview(const Session& s) {
  std::string text(wb_.knowledge().overview());
  text += fmt::format(
      "\n\n---\nThis server: jobs run on device '{}'{}; a session ends after {} versions "
      "written and evaluated; context budget {} tokens.",
      s.settings.device,
      s.settings.device == "cpu" ? " (Triton interpreter: correct results, CPU timings)" : "",
      s.settings.min_versions, s.settings.context_budget_tokens);
  return text_reply(std::move(text), Json{{"document", "knowledge/overview.md"}});
}

Reply CallRunner::triton_syntax() {
  return text_reply(std::string(wb_.knowledge().triton_syntax()),
                    Json{{"document", "knowledge/triton_syntax.md"}});
}

Reply CallRunner::torch_op_info() {
  const Knowledge& k = wb_.knowledge();
  const std::string name = args_.value("op_name", "");
  if (name.empty()) {
    return text_reply("Ops with information: " + join(k.op_names()) +
                          ". Call get_torch_op_info(op_name) for one of them.",
                      Json{{"ops", k.op_names()}});
  }
  const Json* op = k.op(name);
  if (op == nullptr) {
    return failure("get_torch_op_info: no op '" + name + "'. Known ops: " + join(k.op_names()) +
                       ". For another op, start from the closest template "
                       "(get_kernel_template) and the torch documentation.",
                   Json{{"ops", k.op_names()}});
  }
  const std::string canonical = k.op_name(name);
  std::string text = fmt::format("# {}\n\n`{}`\n\nSignature: `{}`\n\n", canonical,
                                 op->value("torch", ""), op->value("signature", ""));
  text += "Definition: " + op->value("definition", "") + "\n\n";
  text += "Shapes: " + op->value("shapes", "") + "\n\nDtypes: " + op->value("dtypes", "") + "\n\n";
  text += fmt::format("Bound: {} — {}\n\n", op->value("bound", ""), op->value("bound_reason", ""));
  text += fmt::format(
      "Bytes moved per call: `{}`; FLOPs per call: `{}` (i = the i-th tensor argument; "
      "benchmark_kernel uses these for GB/s, TFLOP/s and % of peak when the kernel is named "
      "after this op).\n\n",
      op->value("bytes", ""), op->value("flops", ""));
  text += "Pitfalls:\n" + bullet_list(op->value("pitfalls", Json::array())) + "\n";
  text += "Optimisations, in the order the workbench suggests them:\n" +
          bullet_list(op->value("optimizations", Json::array())) + "\n";
  text += "Template: get_kernel_template(\"" + op->value("template", "") + "\")\n\n";
  text += "reference_code (for validate_correctness / benchmark_kernel):\n" +
          fenced(op->value("reference_code", "")) + "\n";
  text += "test_input_code:\n" + fenced(op->value("test_input_code", ""));
  Json structured = *op;
  structured["name"] = canonical;
  return text_reply(std::move(text), std::move(structured));
}

Reply CallRunner::kernel_template() {
  const Knowledge& k = wb_.knowledge();
  const std::string pattern = args_.value("pattern", "elementwise");
  const KernelTemplate* t = k.find_template(pattern);
  std::vector<std::string> patterns;
  for (const auto& kt : k.templates())
    patterns.push_back(kt.pattern);
  if (t == nullptr) {
    return failure(
        "get_kernel_template: no pattern '" + pattern + "'. Patterns: " + join(patterns) + ".",
        Json{{"patterns", patterns}});
  }
  std::string text = fmt::format(
      "# Template: {} — {}\n\n{}\n\nFrom `{}`; its entry point is "
      "`solve` (the workbench calls solve(*args, **kwargs)). The "
      "test suite runs it with the test inputs and reference below.\n\n",
      t->pattern, t->title, t->description, t->file);
  text += fenced(t->source) + "\ntest_input_code:\n" + fenced(t->test_input_code) +
          "\nreference_code:\n" + fenced(t->reference_code);
  return text_reply(std::move(text), Json{{"pattern", t->pattern},
                                          {"title", t->title},
                                          {"file", t->file},
                                          {"entry", t->entry},
                                          {"source", t->source},
                                          {"test_input_code", t->test_input_code},
                                          {"reference_code", t->reference_code},
                                          {"patterns", patterns}});
}

Reply CallRunner::gpu_status(const Session& s) {
  const Json stats = wb_.service_.stats();
  const Json health = wb_.service_.health();
  if (stats.contains("error")) {
    return failure("check_gpu_status: the job service cannot report its devices: " +
                   stats["error"].dump());
  }
  Json devices = Json::array();
  std::string text = "Devices of this kforge server:\n\n";
  for (const auto& d : stats.value("devices", Json::array())) {
    const std::string name = d.value("name", "");
    const Json facts = d.value("facts", Json::object());
    Json peaks = d.value("peaks", Json());
    for (const auto& h : health.value("devices", Json::array())) {
      if (h.value("name", "") == name && h.contains("peaks")) peaks = h["peaks"];
    }
    Json entry = {{"name", name},
                  {"kind", d.value("kind", "")},
                  {"facts", facts},
                  {"busy", d.value("busy", false)},
                  {"queued", d.value("queued", 0)},
                  {"utilisation", d.value("utilisation", 0.0)},
                  {"peaks", peaks}};
    text += fmt::format(
        "- {} ({}){}: {}, {} job(s) queued, busy {:.0f} % of the time since "
        "start",
        name, d.value("kind", ""), name == s.settings.device ? " [this session]" : "",
        d.value("busy", false) ? "running a job" : "idle", d.value("queued", 0),
        100.0 * d.value("utilisation", 0.0));
    if (facts.contains("name")) text += "; " + facts["name"].get<std::string>();
    for (const char* key : {"total_memory_bytes", "memory_bytes", "total_memory"}) {
      if (facts.contains(key) && facts[key].is_number()) {
        text += fmt::format("; {:.1f} GiB memory", facts[key].get<double>() / (1 << 30));
        break;
      }
    }
    if (measured_peak(peaks, "bandwidth_gb_s") > 0) {
      text += fmt::format("; measured peak bandwidth {:.0f} GB/s",
                          measured_peak(peaks, "bandwidth_gb_s"));
    } else if (name != "cpu") {
      text += "; measured peak bandwidth: unknown (not measured yet)";
    }
    text += "\n";
    devices.push_back(std::move(entry));
  }
  if (s.settings.device == "cpu") {
    text +=
        "\nThis session runs on the cpu device: Triton kernels run in the interpreter "
        "(TRITON_INTERPRET=1), so correctness checks are real but timings are CPU timings, "
        "labelled as such and not comparable with GPU numbers. Create tensors with "
        "device=DEVICE in test_input_code.\n";
  }
  return text_reply(std::move(text),
                    Json{{"devices", devices}, {"session_device", s.settings.device}});
}

Reply CallRunner::current_status(const Session& s) {
  const bool stored = slot_->stored;
  std::string text;
  if (stored) {
    text = fmt::format(
        "Session {} — kernel: {} — state: {} — device: {}\nWorkspace: {}\n{} version(s) "
        "written; get_best_kernel needs {} written and evaluated.\n",
        s.id, s.kernel_name.empty() ? "(not named)" : s.kernel_name, to_string(s.state),
        s.settings.device, s.workspace, s.versions.size(), s.settings.min_versions);
  } else {
    // Not stored until it has work in it (workbench.h): say so, and how to start.
    text = fmt::format(
        "No workbench session yet: this conversation's session {} is new and empty (state "
        "start, device {}), and nothing is stored until it has work in it. "
        "set_kernel_name(name) starts it (its files go to {}); get_best_kernel needs {} "
        "versions written and evaluated.\n",
        s.id, s.settings.device, s.workspace, s.settings.min_versions);
  }
  const std::string table = versions_table(s);
  if (!table.empty()) text += "\n" + table;
  const std::string blocker = s.end_blocker();
  if (!blocker.empty() && !s.versions.empty()) text += "\nNot ready to end: " + blocker + ".\n";
  const Json errors = s.notes.value("last_errors", Json::array());
  if (!errors.empty()) {
    const Json& e = errors.back();
    std::string msg = e.value("error", "");
    if (msg.size() > 800) msg = msg.substr(0, 800) + " ...";
    text += fmt::format("\nLast error ({} on v{}): {}\n", e.value("tool", ""),
                        e.value("version", 0), msg);
  }
  text += fmt::format("\nContext: {} of {} tokens ({:.0f} %).\n", s.context.tokens,
                      s.settings.context_budget_tokens,
                      100.0 * static_cast<double>(s.context.tokens) /
                          static_cast<double>(s.settings.context_budget_tokens));
  if (!stored) {
    auto recent = visible_recent_sessions(5);
    if (recent.is_ok() && !recent->empty()) {
      std::vector<std::string> ids;
      for (const auto& r : *recent) {
        ids.push_back(r.id + " (" + (r.kernel_name.empty() ? "unnamed" : r.kernel_name) + ", " +
                      r.state + ")");
      }
      text +=
          "\nTo continue an earlier session instead, call resume_session(session_id) with "
          "one of: " +
          join(ids) + ".\n";
    }
  }
  Json versions = Json::array();
  for (const auto& v : s.versions) {
    versions.push_back(Json{{"version", v.number},
                            {"file", v.file},
                            {"correct", v.correct() ? Json(*v.correct()) : Json()},
                            {"time_ms", v.time_ms() ? Json(*v.time_ms()) : Json()},
                            {"results", v.results}});
  }
  const Version* best = s.best();
  return text_reply(std::move(text),
                    Json{{"state", std::string(to_string(s.state))},
                         {"stored", stored},
                         {"kernel_name", s.kernel_name},
                         {"device", s.settings.device},
                         {"min_versions", s.settings.min_versions},
                         {"versions", versions},
                         {"best_version", best != nullptr ? Json(best->number) : Json()},
                         {"end_blocker", blocker},
                         {"last_errors", errors}});
}

Reply CallRunner::context_usage(const Session& s) {
  const double pct = 100.0 * static_cast<double>(s.context.tokens) /
                     static_cast<double>(s.settings.context_budget_tokens);
  std::string text = fmt::format(
      "Context used by this session's tool calls: about {} of {} tokens ({:.1f} %), over {} "
      "call(s) (context #{} of this session; {} tokens over its whole life).\n"
      "Method: per call, tool name + arguments (JSON) + the answer's text; one token per 4 "
      "ASCII bytes and one per other character, plus {} per call.\n",
      s.context.tokens, s.settings.context_budget_tokens, pct, s.context.calls, s.context.epoch,
      s.context.total_tokens, kCallOverheadTokens);
  if (pct >= 100.0 * kSummaryThreshold) {
    text +=
        "Over 70 %: docs/summarization.md is written; continue in a new session with "
        "resume_session(session_id=\"" +
        s.id + "\").\n";
  } else if (pct >= 50.0) {
    text +=
        "Over 50 %: keep answers short (avoid re-reading large documents); at 70 % the "
        "server writes a summary and asks you to continue in a new session.\n";
  } else {
    text += "Plenty left.\n";
  }
  return text_reply(std::move(text), Json{{"used_tokens", s.context.tokens},
                                          {"budget_tokens", s.settings.context_budget_tokens},
                                          {"percent", pct},
                                          {"calls", s.context.calls},
                                          {"epoch", s.context.epoch},
                                          {"threshold_percent", 100.0 * kSummaryThreshold}});
}

StatusOr<std::vector<store::WorkbenchSessionRecord>> CallRunner::visible_recent_sessions(
    size_t limit) {
  // The caller's own (model/principal.h): a user's are selected by the store, whatever other
  // principals have stored since.
  store::WorkbenchSessionQuery query;
  query.limit = static_cast<int>(limit);
  if (caller_.principal.role == model::Role::kUser) query.owner = caller_.principal.name;
  return wb_.store_->list_sessions(query);
}

Reply CallRunner::list_sessions() {
  auto recent = visible_recent_sessions(20);
  if (!recent.is_ok()) return error_reply(recent.status());
  std::string text = recent->empty() ? "No workbench sessions yet.\n"
                                     : "Recent workbench sessions (newest first):\n\n"
                                       "| session | kernel | state | updated | workspace |\n"
                                       "|---|---|---|---|---|\n";
  Json sessions = Json::array();
  for (const auto& r : *recent) {
    text += fmt::format("| {} | {} | {} | {} | {} |\n", r.id,
                        r.kernel_name.empty() ? "-" : r.kernel_name, r.state,
                        format_time(r.updated_ms), r.workspace);
    sessions.push_back(Json{{"id", r.id},
                            {"kernel_name", r.kernel_name},
                            {"state", r.state},
                            {"updated_ms", r.updated_ms},
                            {"workspace", r.workspace}});
  }
  text += "\nresume_session(session_id) continues one of them.";
  return text_reply(std::move(text), Json{{"sessions", sessions}});
}

Reply CallRunner::resume(const Session& s) {
  std::string text = fmt::format("Resumed session {} in this conversation (context #{}).\n\n", s.id,
                                 s.context.epoch);
  text += render_summary(s, SummaryReason::kResume);
  return text_reply(std::move(text), Json{{"resumed", s.id}, {"epoch", s.context.epoch}});
}

Reply CallRunner::set_kernel_name(Session& s) {
  auto name = normalize_kernel_name(args_.value("name", ""));
  if (!name.is_ok()) return error_reply(name.status());
  if (args_.contains("min_versions")) {
    const int n = args_["min_versions"].get<int>();
    if (n < 1 || n > 20) {
      return failure("set_kernel_name: min_versions must be between 1 and 20, got " +
                     std::to_string(n));
    }
    s.settings.min_versions = n;
  }
  if (args_.contains("context_budget_tokens")) {
    const int64_t b = args_["context_budget_tokens"].get<int64_t>();
    if (b < 1000 || b > 10'000'000) {
      return failure("set_kernel_name: context_budget_tokens must be between 1000 and 10000000");
    }
    s.settings.context_budget_tokens = b;
  }
  if (args_.contains("device")) {
    const std::string device = args_["device"].get<std::string>();
    bool known = false;
    std::vector<std::string> names;
    for (const auto& d : wb_.service_.health().value("devices", Json::array())) {
      names.push_back(d.value("name", ""));
      known = known || names.back() == device;
    }
    if (!known) {
      return failure("set_kernel_name: device '" + device + "' is not a device of this server (" +
                     join(names) + ")");
    }
    s.settings.device = device;
  }
  s.kernel_name = *name;
  s.transition(State::kWrite, "set_kernel_name", wb_.clock_.unix_ms());
  std::string text = fmt::format(
      "Kernel name: {}. Versions will be kernel/{}_v<N>.py and the development log "
      "log/{}_log.md under {} (device {}, at least {} versions before get_best_kernel).\n",
      *name, *name, *name, s.workspace, s.settings.device, s.settings.min_versions);
  if (const Json* op = wb_.knowledge().op(*name); op != nullptr) {
    text += fmt::format(
        "This is the op '{}' of get_torch_op_info: its reference_code and "
        "test_input_code are a ready start for validate_correctness.\n",
        wb_.knowledge().op_name(*name));
  }
  text += "\n" + write_guidance(wb_.knowledge(), s, 1);
  return text_reply(std::move(text), Json{{"kernel_name", *name},
                                          {"min_versions", s.settings.min_versions},
                                          {"device", s.settings.device}});
}

Reply CallRunner::write_test_code(Session& s) {
  // `test_code` is what the Triton-kernel MCP server named it.
  const std::string code = args_.value("code", args_.value("test_code", ""));
  if (code.find_first_not_of(" \t\r\n") == std::string::npos) {
    return failure("write_test_code: the code is empty");
  }
  auto ws = Workspace::open(s.workspace);
  if (!ws.is_ok()) return error_reply(ws.status());
  auto file = ws->write_test("test_" + s.kernel_name + ".py", code);
  if (!file.is_ok()) return error_reply(file.status());
  s.notes["test_file"] = *file;
  return text_reply(
      fmt::format("Stored {} ({} bytes) in the workspace. The server never runs it: "
                  "run_triton_kernel, validate_correctness, measure_kernel_time and "
                  "benchmark_kernel take test_input_code (defining args/kwargs, or sizes and "
                  "make_inputs) and reference_code (defining reference) as arguments.",
                  *file, code.size()),
      Json{{"file", *file}});
}

Reply CallRunner::write_kernel_code(Session& s) {
  const std::string code = args_.value("code", "");
  if (code.find_first_not_of(" \t\r\n") == std::string::npos) {
    return failure(
        "write_kernel_code: the code is empty; send the whole Python file (imports, "
        "@triton.jit kernels and a solve(*args, **kwargs) function)");
  }
  auto ws = Workspace::open(s.workspace);
  if (!ws.is_ok()) return error_reply(ws.status());
  const int number = static_cast<int>(s.versions.size()) + 1;
  auto file = ws->write_version(s.kernel_name, number, code);
  if (!file.is_ok()) return error_reply(file.status());
  Version v{number, *file, code, Json::object(), wb_.clock_.unix_ms()};
  if (Status stored = wb_.store_->insert_version(s.version_record(v)); !stored.is_ok()) {
    return error_reply(stored);
  }
  s.versions.push_back(std::move(v));
  version_ = number;
  s.transition(State::kEvaluation, "write_kernel_code v" + std::to_string(number),
               wb_.clock_.unix_ms());
  std::string text = fmt::format(
      "Stored v{} as {} ({} bytes); state write -> evaluation.{}\n\nValidate it with "
      "validate_correctness(reference_code, test_input_code); run_triton_kernel(test_input_code) "
      "only runs it. The kernel file must define solve(*args, **kwargs) returning the output "
      "tensor(s).\n\n",
      number, *file, code.size(),
      code.find("solve") == std::string::npos
          ? " Warning: the code never mentions solve; the execution tools call solve(*args, "
            "**kwargs) (or pass entry_function)."
          : "");
  text += "Guidance for this version:\n" + write_guidance(wb_.knowledge(), s, number);
  return text_reply(std::move(text), Json{{"version", number}, {"file", *file}});
}

Reply CallRunner::force_write(Session& s) {
  if (s.state == State::kStart) {
    return failure(
        "force_transition_to_write: name the kernel first with set_kernel_name(name) "
        "(it moves start -> write)");
  }
  const State from = s.state;
  s.transition(State::kWrite, "force_transition_to_write", wb_.clock_.unix_ms());
  return text_reply(
      fmt::format("State {} -> write. {} version(s) written; {} more needed before "
                  "get_best_kernel.",
                  to_string(from), s.versions.size(),
                  std::max(0, s.settings.min_versions - static_cast<int>(s.versions.size()))),
      Json{{"from", std::string(to_string(from))}});
}

Reply CallRunner::best_kernel(Session& s) {
  if (s.state == State::kEvaluation) {
    const std::string blocker = s.end_blocker();
    if (!blocker.empty()) {
      return failure(
          fmt::format("get_best_kernel: the session cannot end yet: {}. The rule: at least {} "
                      "versions written and each evaluated (validate_correctness or "
                      "benchmark_kernel), at least one correct.",
                      blocker, s.settings.min_versions),
          Json{{"end_blocker", blocker}, {"min_versions", s.settings.min_versions}});
    }
    s.transition(State::kEnd, "get_best_kernel", wb_.clock_.unix_ms());
  }
  const Version* best = s.best();
  if (best == nullptr) return failure("get_best_kernel: no correct version");
  std::string text = fmt::format(
      "Best kernel: v{} ({}){}.\n\n", best->number, best->file,
      best->time_ms() ? fmt::format(", {:.4g} ms ({})", *best->time_ms(), best->time_source())
                      : ", not timed (no timed correct version)");
  const std::vector<int> tied = s.tied_with_best();
  if (!tied.empty()) {
    std::string names;
    for (int n : tied)
      names += (names.empty() ? "v" : ", v") + std::to_string(n);
    text += fmt::format(
        "A tie, not a win: {} cannot be told apart from v{} (the 95% interval of their time "
        "ratio, with the device's systematic error, covers 1x); v{} has the lowest median. "
        "Prefer the simplest of them, or time them again at larger sizes.\n\n",
        names, best->number, best->number);
  }
  text += versions_table(s) + "\n";
  text += fenced(best->source);
  text += fmt::format("\nFiles: {}/{} and the development log {}/log/{}_log.md.", s.workspace,
                      best->file, s.workspace, s.kernel_name);
  return text_reply(std::move(text),
                    Json{{"version", best->number},
                         {"file", best->file},
                         {"path", s.workspace + "/" + best->file},
                         {"time_ms", best->time_ms() ? Json(*best->time_ms()) : Json()},
                         {"tied_with", tied},
                         {"results", best->results},
                         {"source", best->source}});
}

}  // namespace kforge::workbench
