#include "kforge/workbench/narrative.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "kforge/workbench/context_meter.h"
#include "kforge/workbench/outcome.h"
#include "kforge/workbench/workspace.h"

namespace kforge::workbench {
namespace {

std::string verdict_cell(const Version& v) {
  const std::optional<bool> c = v.correct();
  if (!c) return "not evaluated";
  return *c ? "yes" : "no";
}

std::string time_cell(const Version& v) {
  const std::optional<double> t = v.time_ms();
  if (!t) return "-";
  return fmt::format("{:.4g}", *t);
}

std::string speedup_cell(const Version& v) {
  if (!v.results.contains("benchmark")) return "-";
  const Json& b = v.results["benchmark"];
  if (!b.contains("speedup_geomean") || !b["speedup_geomean"].is_number()) return "-";
  return fmt::format("{:.3g}x", b["speedup_geomean"].get<double>());
}

// What the version says about itself: its module docstring's first line or first comment.
std::string intent_of(const std::string& source) {
  size_t pos = 0;
  while (pos < source.size()) {
    size_t end = source.find('\n', pos);
    if (end == std::string::npos) end = source.size();
    std::string line = source.substr(pos, end - pos);
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos) {
      line = line.substr(first);
      if (line.starts_with("#") && !line.starts_with("#!")) {
        return line.substr(line.find_first_not_of("# "));
      }
      for (const char* quote : {"\"\"\"", "'''"}) {
        if (line.starts_with(quote)) {
          std::string text = line.substr(3);
          const size_t close = text.find(quote);
          if (close != std::string::npos) text = text.substr(0, close);
          if (!text.empty()) return text;
        }
      }
      if (!line.starts_with("import") && !line.starts_with("from")) return "";
    }
    pos = end + 1;
  }
  return "";
}

void append_cases_table(std::string& out, const Json& result, bool with_speedup) {
  const Json cases = result.value("cases", Json::array());
  if (cases.empty()) return;
  out += with_speedup
             ? "| size | kernel median (ms) | torch median (ms) | speedup |\n|---|---|---|---|\n"
             : "| size | median (ms) | mean (ms) | trials |\n|---|---|---|---|\n";
  for (const auto& c : cases) {
    const Json t = c.value("timing", Json::object());
    auto num = [](const Json& j, const char* key) {
      const Json v = j.is_object() ? j.value(key, Json()) : Json();
      return v.is_number() ? fmt::format("{:.4g}", v.get<double>()) : std::string("-");
    };
    if (with_speedup) {
      out += fmt::format("| {} | {} | {} | {} |\n", c.value("label", ""), num(t, "median_ms"),
                         num(c.value("reference_timing", Json::object()), "median_ms"),
                         case_speedup_cell(c));
    } else {
      out += fmt::format("| {} | {} | {} | {} |\n", c.value("label", ""), num(t, "median_ms"),
                         num(t, "mean_ms"), num(t, "trials"));
    }
  }
}

}  // namespace

std::string format_time(int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string next_step(const Session& s) {
  const int n = static_cast<int>(s.versions.size());
  const Version* latest = s.latest();
  switch (s.state) {
    case State::kStart:
      return "research the op (get_overview, get_torch_op_info(op_name), "
             "get_kernel_template(pattern), check_gpu_status), then set_kernel_name(name) to "
             "start writing";
    case State::kWrite:
      if (latest != nullptr && latest->correct() == false) {
        return fmt::format(
            "v{} is not correct: fix it and write_kernel_code(code) for v{} (the error is in the "
            "last answer and in get_current_status)",
            latest->number, n + 1);
      }
      if (n == 0) {
        return "write_kernel_code(code) for v1: a straightforward, correct kernel with a "
               "solve(*args, **kwargs) entry point (write_test_code(code) stores your test "
               "script, optional)";
      }
      return fmt::format(
          "write_kernel_code(code) for v{}: one optimisation at a time, so the "
          "log shows what each one bought",
          n + 1);
    case State::kEvaluation: {
      if (latest == nullptr) return "force_transition_to_write(), then write_kernel_code(code)";
      if (!latest->evaluated()) {
        return fmt::format(
            "validate_correctness(reference_code, test_input_code) on v{} (run_triton_kernel("
            "test_input_code) first if you want to see it run)",
            latest->number);
      }
      if (latest->correct() == true && !latest->time_ms()) {
        return fmt::format(
            "benchmark_kernel(test_input_code, reference_code) to time v{} against torch",
            latest->number);
      }
      const std::string blocker = s.end_blocker();
      if (!blocker.empty()) {
        return fmt::format(
            "force_transition_to_write(), then write_kernel_code(code) for v{} "
            "({})",
            n + 1, blocker);
      }
      return "get_best_kernel() to finish with the fastest correct version, or "
             "force_transition_to_write() to try another version";
    }
    case State::kEnd: {
      const Version* best = s.best();
      return fmt::format(
          "done{}: set_kernel_name(name, new_session=true) starts another kernel; "
          "force_transition_to_write() continues this one",
          best != nullptr ? fmt::format(" (best: v{}, {})", best->number, best->file) : "");
    }
  }
  return "";
}

std::string versions_table(const Session& s) {
  if (s.versions.empty()) return "";
  std::string out =
      "| version | correct | time (ms) | speedup vs torch | file |\n|---|---|---|---|---|\n";
  const Version* best = s.best();
  const std::vector<int> tied = s.tied_with_best();
  for (const auto& v : s.versions) {
    const bool ties = std::find(tied.begin(), tied.end(), v.number) != tied.end();
    out += fmt::format("| v{}{} | {} | {} | {} | {} |\n", v.number,
                       best == &v ? " (best)" : (ties ? " (ties best)" : ""), verdict_cell(v),
                       time_cell(v), speedup_cell(v), v.file);
  }
  return out;
}

std::string render_dev_log(const Session& s, const Knowledge& knowledge) {
  std::string out = fmt::format("# {} Triton kernel development log\n\n", s.kernel_name);
  out += fmt::format("- session: `{}`\n- state: {}\n- device: {}\n- started: {}\n- updated: {}\n",
                     s.id, to_string(s.state), s.settings.device, format_time(s.created_ms),
                     format_time(s.updated_ms));
  if (const Json* op = knowledge.op(s.kernel_name); op != nullptr) {
    out += fmt::format("- op: `{}` ({}-bound)\n", op->value("torch", ""), op->value("bound", ""));
  }
  out += "\n## Versions\n\n";
  const std::string table = versions_table(s);
  out += table.empty() ? "No version written yet.\n" : table;
  for (const auto& v : s.versions) {
    out += fmt::format("\n### v{} — `{}`\n\n", v.number, v.file);
    out += fmt::format("- written: {} ({} lines)\n", format_time(v.created_ms),
                       std::count(v.source.begin(), v.source.end(), '\n') + 1);
    const std::string intent = intent_of(v.source);
    if (!intent.empty()) out += "- what it does: " + intent + "\n";
    if (v.results.contains("validation")) {
      const Json& val = v.results["validation"];
      out += fmt::format("- correctness: {}", val.value("passed", false) ? "passed" : "FAILED");
      for (const auto& c : val.value("cases", Json::array())) {
        const Json corr = c.value("correctness", Json::object());
        out += fmt::format("; {}: {}", c.value("label", ""), c.value("verdict", ""));
        if (corr.is_object() && corr.value("max_abs_error", Json()).is_number()) {
          out += fmt::format(" (max abs err {:.3g})", corr["max_abs_error"].get<double>());
        }
      }
      out += "\n";
      for (const auto& c : val.value("cases", Json::array())) {
        if (c.contains("error")) {
          std::string e = c["error"].get<std::string>();
          if (e.size() > 400) e = e.substr(0, 400) + " ...";
          out += "  - error (" + c.value("label", "") + "): `" + e + "`\n";
          break;
        }
      }
    }
    if (v.results.contains("timing")) {
      out += "\nmeasure_kernel_time:\n\n";
      append_cases_table(out, v.results["timing"], false);
    }
    if (v.results.contains("benchmark")) {
      out += "\nbenchmark_kernel (speedup = torch median / kernel median):\n\n";
      append_cases_table(out, v.results["benchmark"], true);
    }
  }
  if (const Version* best = s.best(); best != nullptr) {
    out += fmt::format("\n## Best so far\n\nv{} (`{}`){}\n", best->number, best->file,
                       best->time_ms() ? fmt::format(", {:.4g} ms", *best->time_ms()) : "");
  }
  return out;
}

std::string render_summary(const Session& s, SummaryReason why) {
  std::string out = "# Workbench session summary\n\n";
  if (why == SummaryReason::kContextBudget) {
    out += fmt::format(
        "Written {} because the session's context passed {} % of its {}-token budget ({} tokens "
        "estimated). Continue in a new session: open a new chat (a new MCP session) and call "
        "`resume_session(session_id=\"{}\")`. Every file stays where it is.\n\n",
        format_time(s.context.summary_written_ms > 0 ? s.context.summary_written_ms : s.updated_ms),
        std::lround(kSummaryThreshold * 100), s.settings.context_budget_tokens, s.context.tokens,
        s.id);
  } else {
    // A resume starts a new context: nothing of the old one's budget is claimed here.
    out += fmt::format(
        "The session as it stands {}, resumed in this conversation (context #{}). Every file "
        "stays where it is.\n\n",
        format_time(s.updated_ms), s.context.epoch);
  }
  out += fmt::format(
      "## Session\n\n- id: `{}`\n- kernel: {}\n- state: {}\n- device: {}\n- workspace: `{}`\n"
      "- versions: {} written, at least {} needed\n\n",
      s.id, s.kernel_name.empty() ? "(not named yet)" : s.kernel_name, to_string(s.state),
      s.settings.device, s.workspace, s.versions.size(), s.settings.min_versions);
  out += "## Versions and results\n\n";
  const std::string table = versions_table(s);
  out += table.empty() ? "No version written yet.\n" : table;
  if (const Version* best = s.best(); best != nullptr) {
    out += fmt::format("\n## Best\n\nv{} (`{}`){}\n", best->number, best->file,
                       best->time_ms() ? fmt::format(", {:.4g} ms", *best->time_ms()) : "");
  }
  const Json errors = s.notes.value("last_errors", Json::array());
  if (!errors.empty()) {
    out += "\n## Last errors\n\n";
    for (const auto& e : errors) {
      std::string text = e.value("error", "");
      if (text.size() > 600) text = text.substr(0, 600) + " ...";
      out += fmt::format("- {} on v{}: {}\n", e.value("tool", ""), e.value("version", 0), text);
    }
  }
  if (s.notes.contains("test_file")) {
    out += fmt::format("\n## Tests\n\n- `{}`\n", s.notes["test_file"].get<std::string>());
  }
  out += "\n## Next steps\n\n1. Start a new session and call `resume_session(session_id=\"" + s.id +
         "\")`.\n2. Then: " + next_step(s) + ".\n";
  return out;
}

}  // namespace kforge::workbench
