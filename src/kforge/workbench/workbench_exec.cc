// The execution tools (run_triton_kernel, validate_correctness, measure_kernel_time,
// benchmark_kernel): each call is one kforge job per input case (job_builder.h), submitted
// through the JobService; the answer is written when every job has finished.
#include <fmt/format.h>

#include <cmath>

#include "kforge/common/log.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/workbench/call_runner.h"
#include "kforge/workbench/guidance.h"
#include "kforge/workbench/narrative.h"
#include "kforge/workbench/workspace.h"

namespace kforge::workbench {
namespace {

Purpose purpose_of(Tool tool) {
  switch (tool) {
    case Tool::kValidateCorrectness:
      return Purpose::kValidate;
    case Tool::kMeasureKernelTime:
      return Purpose::kMeasure;
    case Tool::kBenchmarkKernel:
      return Purpose::kBenchmark;
    default:
      return Purpose::kRun;
  }
}

// The argument holding the kernel code in the tool's stateless form.
const char* stateless_code_key(Tool tool, const Json& args) {
  if (tool == Tool::kRunTritonKernel) return args.contains("code") ? "code" : "kernel_code";
  return args.contains("kernel_code") ? "kernel_code" : "code";
}

std::string ms(const Json& v) {
  return v.is_number() ? fmt::format("{:.4g}", v.get<double>()) : std::string("-");
}

std::string sci(const Json& v) {
  return v.is_number() ? fmt::format("{:.2e}", v.get<double>()) : std::string("-");
}

std::string verdict_word(const CaseOutcome& o) {
  if (o.verdict == "ok") return o.correct == true ? "pass" : "ok";
  if (o.verdict == "mismatch") return "FAIL (wrong values)";
  return "FAIL (" + o.verdict + ")";
}

// A hint for errors that have a usual cause.
std::string hint_for(const CaseOutcome& o) {
  const std::string& e = o.error;
  if (o.device == "cpu" &&
      (e.find("CUDA") != std::string::npos || e.find("NVIDIA driver") != std::string::npos)) {
    return "Hint: this session runs on the cpu device; create tensors with device=DEVICE in "
           "test_input_code (DEVICE is 'cuda' on a GPU job and 'cpu' here).";
  }
  if (e.find("defines no function solve") != std::string::npos) {
    return "Hint: add def solve(...) that launches your kernel and returns the output, or pass "
           "entry_function.";
  }
  if (e.find("arange's range must be a power of 2") != std::string::npos) {
    return "Hint: tl.arange needs a power-of-two length: round BLOCK_SIZE up with "
           "triton.next_power_of_2 and mask the tail.";
  }
  if (o.verdict == "reference_error") {
    return "Hint: reference_code failed, not your kernel: it must define reference(*args, "
           "**kwargs) returning tensor(s), and run on the test inputs.";
  }
  if (o.verdict == "input_error") {
    return "Hint: test_input_code failed, not your kernel: it must define args (and kwargs), or "
           "sizes = [...] and make_inputs(size), creating tensors with device=DEVICE.";
  }
  if (o.verdict == "mismatch") {
    return "Hint: compare the first mismatching index with your masking and indexing; a wrong "
           "tail (last block) usually means a missing mask, wrong values everywhere a wrong "
           "formula or dtype.";
  }
  return "";
}

double geomean(const std::vector<double>& values) {
  double s = 0;
  for (double v : values)
    s += std::log(v);
  return values.empty() ? 0.0 : std::exp(s / static_cast<double>(values.size()));
}

}  // namespace

bool CallRunner::is_stateless() const {
  if (!is_execution_tool(tool_)) return false;
  return args_.contains("code") || args_.contains("kernel_code");
}

StatusOr<std::string> CallRunner::plan_execution_locked(Session& s) {
  purpose_ = purpose_of(tool_);
  ExecutionSpec spec;
  spec.purpose = purpose_;
  if (is_stateless()) {
    spec.kernel_source = args_.value(stateless_code_key(tool_, args_), "");
    kernel_file_ = "kernel_code";
  } else {
    const Version* latest = s.latest();
    if (latest == nullptr) {
      return failed_precondition(
          "there is no kernel version yet: write_kernel_code(code) stores v1 (or pass the code "
          "as an argument: the tool's stateless form)");
    }
    spec.kernel_source = latest->source;
    version_ = latest->number;
    kernel_file_ = latest->file;
  }
  spec.entry = args_.value("entry_function", "solve");
  spec.test_input_code = args_.value("test_input_code", "");
  if (args_.contains("reference_code") && args_["reference_code"].is_string()) {
    spec.reference_code = args_["reference_code"].get<std::string>();
  }
  spec.device = s.settings.device;
  if (args_.contains("rtol") && args_["rtol"].is_number()) spec.rtol = args_["rtol"].get<double>();
  if (args_.contains("atol") && args_["atol"].is_number()) spec.atol = args_["atol"].get<double>();
  if (args_.contains("warmup") && args_["warmup"].is_number_integer()) {
    spec.warmup = args_["warmup"].get<int>();
  }
  if (args_.contains("rep") && args_["rep"].is_number_integer()) spec.rep = args_["rep"].get<int>();
  if (args_.contains("trials") && args_["trials"].is_number_integer()) {
    spec.trials = args_["trials"].get<int>();
  }
  spec.interpreter_compat = std::string(wb_.knowledge().interpreter_compat());
  KF_ASSIGN_OR_RETURN(planned_, plan_jobs(spec));
  // Jobs make a new session worth keeping (workbench.h); stored now, its workspace can keep
  // what they ran with. Should that fail, finalize_locked tries again and says so.
  ran_jobs_ = true;
  if (store_locked().is_ok()) {
    // The workspace keeps what the latest execution ran with.
    if (auto ws = Workspace::open(s.workspace); ws.is_ok()) {
      ws->write_test("test_inputs.py", spec.test_input_code).status().ignore();
      if (spec.reference_code) {
        ws->write_test("reference.py", *spec.reference_code).status().ignore();
      }
    }
  }
  return spec.device;
}

void CallRunner::submit_planned(const std::string& device) {
  {
    MutexLock guard(exec_mu_);
    finished_.assign(planned_.size(), model::JobRecord{});
    remaining_ = planned_.size() + 1;  // +1: released once every job is submitted
  }
  auto self = shared_from_this();
  jobs::Caller submitter(caller_.submitter.empty() ? "workbench" : caller_.submitter,
                         caller_.principal);
  submitter.process_bound = caller_.process_bound;
  for (size_t i = 0; i < planned_.size(); ++i) {
    auto job = wb_.service_.submit(planned_[i].request, submitter);
    if (!job.is_ok()) {
      model::JobRecord failed;
      failed.state = model::JobState::kFailed;
      failed.error = "the job was not accepted: " + job.status().to_string();
      failed.device = device;
      job_finished(i, failed);
      continue;
    }
    if (caller_.job_started) {
      caller_.job_started(job->id, fmt::format("{} {} (input {})", tool_name(tool_),
                                               version_ > 0 ? "v" + std::to_string(version_)
                                                            : std::string("kernel_code"),
                                               planned_[i].input_case.label));
    }
    auto sub = wb_.service_.when_done(
        job->id, [self, i](const model::JobRecord& done) { self->job_finished(i, done); });
    if (!sub.is_ok()) {
      model::JobRecord lost = *job;
      lost.state = model::JobState::kFailed;
      lost.error = "lost track of the job: " + sub.status().to_string();
      job_finished(i, lost);
    }
  }
  job_finished(planned_.size(), model::JobRecord{});  // releases the submission's count
}

void CallRunner::job_finished(size_t index, const model::JobRecord& job) {
  bool last = false;
  {
    MutexLock guard(exec_mu_);
    if (index < finished_.size()) finished_[index] = job;
    last = --remaining_ == 0;
  }
  if (!last) return;
  auto self = shared_from_this();
  wb_.executor_([self] { self->all_jobs_finished(); });
}

void CallRunner::all_jobs_finished() {
  std::vector<CaseOutcome> outcomes;
  const bool timed = purpose_ == Purpose::kMeasure || purpose_ == Purpose::kBenchmark;
  Json peaks;
  {
    MutexLock guard(exec_mu_);
    for (size_t i = 0; i < planned_.size(); ++i) {
      outcomes.push_back(interpret_job(planned_[i].input_case, finished_[i], kernel_file_));
    }
  }
  MutexLock lock(slot_->mu);
  Session& s = slot_->session;
  if (timed) {
    for (const auto& d : wb_.service_.health().value("devices", Json::array())) {
      if (d.value("name", "") == s.settings.device) peaks = d.value("peaks", Json());
    }
    const Json* op = wb_.knowledge().op(s.kernel_name);
    for (auto& o : outcomes)
      add_roofline(o, op, peaks);
  }
  Reply reply = record_results(s, outcomes);
  finalize_locked(s, reply);
  lock.unlock();
  answer(std::move(reply));
}

Reply CallRunner::record_results(Session& s, std::vector<CaseOutcome>& outcomes) {
  const int64_t now = wb_.clock_.unix_ms();
  const std::string subject =
      version_ > 0 ? fmt::format("v{} ({})", version_, kernel_file_) : "kernel_code";
  bool all_ran = true;      // every case reached the kernel's own verdict
  bool all_ok = true;       // ... and it was ok
  bool all_correct = true;  // correctness verdicts all true
  Json cases = Json::array();
  std::string first_error;
  const CaseOutcome* first_bad = nullptr;
  for (const auto& o : outcomes) {
    cases.push_back(o.to_json());
    if (!o.correct.has_value() && o.verdict != "ok") all_ran = false;
    if (o.verdict != "ok") all_ok = false;
    if (o.correct != true) all_correct = false;
    if (o.verdict != "ok" && first_bad == nullptr) first_bad = &o;
  }
  const bool on_cpu = s.settings.device == "cpu";
  std::string text;
  Json structured = {{"tool", std::string(tool_name(tool_))},
                     {"kernel", subject},
                     {"device", s.settings.device},
                     {"cases", cases}};
  Version* version = version_ > 0 ? s.find(version_) : nullptr;
  Json result = {{"cases", cases}, {"at_ms", now}, {"device", s.settings.device}};
  const char* what = "";
  switch (purpose_) {
    case Purpose::kRun: {
      what = "run";
      result["ok"] = all_ok;
      text = fmt::format("run_triton_kernel: {} {} on {} input case(s) (device {}).\n\n", subject,
                         all_ok ? "ran without error" : "did NOT run cleanly", outcomes.size(),
                         s.settings.device);
      text += "| input | result | inputs | job |\n|---|---|---|---|\n";
      for (const auto& o : outcomes) {
        std::string shapes;
        for (const auto& in : o.input_summary) {
          if (!shapes.empty()) shapes += ", ";
          shapes += in.contains("shape") ? in["shape"].dump() + " " + in.value("dtype", "")
                                         : in.value("name", "");
        }
        text += fmt::format("| {} | {} | {} | {} |\n", o.label, verdict_word(o), shapes, o.job_id);
      }
      for (const auto& o : outcomes) {
        if (!o.output.empty()) {
          text += "\nOutput of the kernel (" + o.label + "):\n" + o.output + "\n";
          break;
        }
      }
      text += all_ok ? "\nIt compiled and ran, and its outputs were consistent over repeated "
                       "calls; that says nothing about correctness yet: validate_correctness "
                       "compares it with the torch reference.\n"
                     : "";
      break;
    }
    case Purpose::kValidate: {
      what = "validation";
      result["passed"] = all_correct;
      text = fmt::format(
          "validate_correctness: {} is {} (device {}, {} input case(s), fresh seeded inputs per "
          "trial).\n\n",
          subject,
          !all_ran ? "NOT EVALUATED: a job did not run"
                   : (all_correct ? "CORRECT on every input" : "WRONG"),
          s.settings.device, outcomes.size());
      text +=
          "| input | result | max abs error | max rel error | atol / rtol | trials |\n"
          "|---|---|---|---|---|---|\n";
      for (const auto& o : outcomes) {
        const Json c = o.correctness.is_object() ? o.correctness : Json::object();
        text += fmt::format("| {} | {} | {} | {} | {} / {} | {} |\n", o.label, verdict_word(o),
                            sci(c.value("max_abs_error", Json())),
                            sci(c.value("max_rel_error", Json())), sci(c.value("atol", Json())),
                            sci(c.value("rtol", Json())),
                            c.contains("trials") ? c["trials"].dump() : std::string("-"));
      }
      text +=
          "\nA size passes when |kernel - reference| <= atol + rtol * |reference| for every "
          "element of every trial (atol/rtol: the arguments, else kforge's defaults for the "
          "dtype, shown above).\n";
      break;
    }
    case Purpose::kMeasure: {
      what = "timing";
      result["ok"] = all_ok;
      text = fmt::format("measure_kernel_time: {} on device {}{}.\n\n", subject, s.settings.device,
                         on_cpu ? " (CPU timings of the Triton interpreter: for checking the "
                                  "flow, not for judging speed)"
                                : "");
      text +=
          "| input | median (ms) | mean (ms) | min | max | trials | GB/s | TFLOP/s |\n"
          "|---|---|---|---|---|---|---|---|\n";
      for (const auto& o : outcomes) {
        const Json t = o.timing.is_object() ? o.timing : Json::object();
        const Json roof = o.roofline.is_object() ? o.roofline : Json::object();
        text += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", o.label,
                            ms(t.value("median_ms", Json())), ms(t.value("mean_ms", Json())),
                            ms(t.value("min_ms", Json())), ms(t.value("max_ms", Json())),
                            t.contains("trials") ? t["trials"].dump() : "-",
                            ms(roof.value("achieved_gb_s", Json())),
                            ms(roof.value("achieved_tflop_s", Json())));
      }
      text +=
          "\nTimes are per call: warm-up first, then timed trials (L2 flushed before each "
          "on a GPU) until the statistics are stable; the median is the number to compare.\n";
      break;
    }
    case Purpose::kBenchmark: {
      what = "benchmark";
      std::vector<double> speedups;
      for (const auto& o : outcomes) {
        if (o.speedup && *o.speedup > 0) speedups.push_back(*o.speedup);
      }
      result["correct"] = all_correct;
      if (!speedups.empty()) result["speedup_geomean"] = geomean(speedups);
      const Json* op = wb_.knowledge().op(s.kernel_name);
      const std::string advice = benchmark_advice(op, outcomes);
      result["advice"] = advice;
      text = fmt::format("benchmark_kernel: {} against the torch reference on device {}: {}.\n\n",
                         subject, s.settings.device,
                         !all_ran ? "a job did not run"
                                  : (all_correct ? "correct on every input" : "WRONG results"));
      text +=
          "| input | kernel median (ms) | torch median (ms) | speedup | GB/s | % peak BW | "
          "TFLOP/s | % peak FLOP/s |\n|---|---|---|---|---|---|---|---|\n";
      for (const auto& o : outcomes) {
        const Json t = o.timing.is_object() ? o.timing : Json::object();
        const Json rt = o.ref_timing.is_object() ? o.ref_timing : Json::object();
        const Json roof = o.roofline.is_object() ? o.roofline : Json::object();
        auto pct = [&](const char* key) {
          return roof.contains(key) ? fmt::format("{:.1f}", roof[key].get<double>())
                                    : std::string(on_cpu ? "n/a" : "unknown");
        };
        text += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", o.label,
                            ms(t.value("median_ms", Json())), ms(rt.value("median_ms", Json())),
                            case_speedup_cell(o.to_json()), ms(roof.value("achieved_gb_s", Json())),
                            pct("pct_of_peak_bandwidth"),
                            ms(roof.value("achieved_tflop_s", Json())), pct("pct_of_peak_flops"));
      }
      if (!speedups.empty()) {
        text += fmt::format(
            "\nSpeedup = torch median / kernel median (above 1x the kernel is "
            "faster), with its 95% interval and whether that lies above 1x (faster), below "
            "(slower) or around it (indistinguishable); geometric mean over the inputs: "
            "{:.3g}x.\n",
            geomean(speedups));
      }
      if (op == nullptr) {
        text +=
            "GB/s and % of peak need the op's bytes and FLOPs: name the kernel after an op "
            "of get_torch_op_info to get them.\n";
      }
      if (!advice.empty()) text += advice + "\n";
      s.notes["last_benchmark"] = {{"version", version_},
                                   {"at_ms", now},
                                   {"speedup_geomean", result.value("speedup_geomean", Json())}};
      break;
    }
  }
  if (first_bad != nullptr) {
    first_error = first_bad->error;
    text += fmt::format("\nFirst problem ({}, job {}): {}\n{}", first_bad->label, first_bad->job_id,
                        first_bad->verdict, first_error.empty() ? "" : first_error + "\n");
    const std::string hint = hint_for(*first_bad);
    if (!hint.empty()) text += hint + "\n";
  }
  std::vector<std::string> flags;
  for (const auto& o : outcomes) {
    for (const auto& f : o.flags) {
      if (std::find(flags.begin(), flags.end(), f) == flags.end()) flags.push_back(f);
    }
  }
  if (!flags.empty()) {
    text += "\nChecks and warnings:\n";
    for (const auto& f : flags)
      text += "- " + f + "\n";
  }
  // What the result means for the session.
  const bool verdict_tool = purpose_ == Purpose::kValidate || purpose_ == Purpose::kBenchmark;
  if (version != nullptr && all_ran) {
    version->results[what] = result;
    if (Status st = wb_.store_->update_version_results(s.id, version->number, version->results);
        !st.is_ok()) {
      text += "\nwarning: the results could not be saved: " + st.message() + "\n";
    }
    if (verdict_tool && !all_correct && s.state == State::kEvaluation) {
      s.transition(State::kWrite, fmt::format("v{} failed {}", version_, tool_name(tool_)), now);
      text += fmt::format(
          "\nState evaluation -> write: v{} must be fixed; the next "
          "write_kernel_code stores v{}.\n",
          version_, s.versions.size() + 1);
    }
  } else if (version != nullptr && !all_ran) {
    text +=
        "\nNo verdict on the kernel was recorded: a job did not reach one (the reference, the "
        "test inputs or kforge itself failed; see above).\n";
  }
  if (!first_error.empty() || (verdict_tool && !all_correct)) {
    s.note_error(std::string(tool_name(tool_)), version_,
                 first_bad != nullptr ? first_bad->verdict + ": " + first_error : "wrong results",
                 now);
  }
  structured["ok"] =
      purpose_ == Purpose::kValidate || purpose_ == Purpose::kBenchmark ? all_correct : all_ok;
  structured["result"] = result;
  Reply reply{std::move(text), std::move(structured), false};
  // isError when the kernel failed or a job could not run; a wrong kernel is an error the
  // agent must act on, as the evaluation tools report it.
  reply.is_error =
      !(purpose_ == Purpose::kValidate || purpose_ == Purpose::kBenchmark ? all_correct && all_ran
                                                                          : all_ok);
  return reply;
}

}  // namespace kforge::workbench
