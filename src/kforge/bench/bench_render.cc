#include "kforge/bench/bench_render.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

#include "kforge/bench/bench_log_words.h"
#include "kforge/bench/kernel_library.h"
#include "kforge/bench/svg_chart.h"
#include "kforge/common/files.h"

namespace kforge::bench {
namespace {

template <typename... Args>
std::string say(const char* pattern, Args&&... args) {
  return fmt::format(fmt::runtime(pattern), std::forward<Args>(args)...);
}

std::string str(const Json& j, const char* key, const std::string& fallback = "") {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

std::optional<double> num(const Json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

const Json& sub(const Json& j, const char* key) {
  static const Json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string ms(std::optional<double> v) {
  return v ? fmt::format("{:.4g}", *v) : "—";
}

std::string times(std::optional<double> v) {
  return format_speedup(v);
}

std::string error_value(const Json& v) {
  if (v.is_number()) return fmt::format("{:.3g}", v.get<double>());
  if (v.is_string()) return "inf";
  return "—";
}

std::string quantity(double value, const char* unit) {
  static constexpr std::array<const char*, 5> kPrefixes = {"", "K", "M", "G", "T"};
  size_t i = 0;
  while (value >= 1000 && i + 1 < kPrefixes.size()) {
    value /= 1000;
    ++i;
  }
  return fmt::format("{:.3g} {}{}", value, kPrefixes[i], unit);
}

// One line out of a possibly multi-line error (a traceback ends with what went wrong).
std::string condense(const std::string& error) {
  auto lines_of = [](const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
      size_t nl = s.find('\n', start);
      std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if (line.find_first_not_of(" \t\r") != std::string::npos) out.push_back(line);
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    return out;
  };
  std::vector<std::string> lines = lines_of(error);
  if (lines.empty()) return "";
  std::string text = lines.front();
  if (lines.size() > 1) {
    std::string last = lines.back();
    last.erase(0, last.find_first_not_of(" \t"));
    text += " … " + last;
  }
  for (char& c : text) {
    if (c == '|') c = '/';  // keep Markdown tables intact
  }
  if (text.size() > 400) text = text.substr(0, 397) + "...";
  return text;
}

std::string size_header(const char* first) {
  return std::string("| ") + first + " | Small | Medium | Large |";
}

std::string kernel_cell(const Json& row) {
  std::string k = str(row, "kernel", "?");
  if (str(row, "kind") == "version" && !row.value("correct", false)) k += " ❌";
  return k;
}

// % of the peak for a row's cell at `size`, or "—".
std::string percent_of_peak(const Json& report, const Json& op, const Json& cell) {
  const bool compute = str(op, "bound") == "compute";
  const Json& peaks = sub(report, "peaks");
  const Json& peak =
      compute ? sub(sub(peaks, "matmul"), str(op, "dtype").c_str()) : sub(peaks, "copy");
  const auto achieved = num(cell, compute ? "tflops" : "gbs");
  const auto top = num(peak, compute ? "tflops" : "gbs");
  if (!achieved || !top || *top <= 0) return "—";
  return fmt::format("{:.1f} %", 100.0 * *achieved / *top);
}

std::string phase1(const Json& op, const Words& w) {
  const Json& p = sub(op, "phase1");
  std::string md = std::string(w.phase1) + "\n\n";
  md += "- **Operation**: `" + str(op, "title") + "` (kforge op `" + str(op, "op") + "`)\n";
  md += std::string("- **") + w.definition + "**: " + str(p, "definition") + "\n";
  md += std::string("- **") + w.io + "**: " + str(p, "inputs_outputs") + "\n";
  md += std::string("- **") + w.complexity + "**: " + str(p, "complexity") + "\n";
  md += std::string("- **") + w.bound +
        "**: " + (str(p, "bound") == "compute" ? w.compute_bound : w.memory_bound) + " — " +
        str(p, "bound_reason") + "\n";
  std::string sizes;
  for (const auto& [name, s] : sub(op, "sizes").items()) {
    if (!sizes.empty()) sizes += "; ";
    sizes += name + " " + str(s, "label") + " (" +
             say(w.size_cost, quantity(num(s, "bytes").value_or(0), "B"),
                 quantity(num(s, "flops").value_or(0), "FLOP")) +
             ")";
  }
  md += std::string("- **") + w.sizes + "**: " + sizes + "\n";
  if (!str(p, "size_mapping").empty()) {
    md += std::string("- **") + w.size_mapping + "**: " + str(p, "size_mapping") + "\n";
  }
  return md;
}

std::string phase2(const Json& op, LogLang lang, const Words& w) {
  std::string md = std::string(w.phase2) + "\n\n";
  const std::string origin = str(op, "kernels");
  md += (origin == "library"  ? say(w.from_library, str(op, "op"))
         : origin == "inline" ? std::string(w.from_inline)
                              : say(w.from_dir, origin, str(op, "op"))) +
        "\n";
  for (const auto& row : sub(op, "rows")) {
    if (str(row, "kind") != "version") continue;
    const Json& summary = sub(row, "summary");
    std::string text = lang == LogLang::kKo ? str(summary, "ko") : "";
    if (text.empty()) text = str(summary, "en", w.no_summary);
    if (text.empty()) text = w.no_summary;
    md += "\n### " + str(row, "kernel") + " — " + text + "\n\n";
    const std::string error = str(row, "error");
    if (error.starts_with("could not be loaded: ")) {
      md += std::string(w.not_loaded) + ": " + condense(error.substr(21)) + "\n";
    } else {
      md += std::string(w.source) + ": `" + str(row, "origin") + "`\n";
    }
  }
  return md;
}

// The tries of --regenerate-cmd, in order, each with what it was after and how it ended.
std::string regeneration(const Json& report, const Json& op, const Words& w) {
  std::string lines;
  for (const auto& row : sub(op, "rows")) {
    bool first = true;
    for (const auto& t : sub(row, "regeneration")) {
      const Json& after = sub(t, "after");
      const Json& command = sub(t, "command");
      // The failure that started the loop in full (once fixed, Failures no longer shows it);
      // a later try's is the previous try's outcome, shown just above.
      std::string why = str(after, "error_kind");
      if (first) why += " (" + condense(str(after, "error")) + ")";
      first = false;
      lines +=
          "- " +
          say(w.regen_try, str(row, "kernel"), num(t, "try").value_or(0), num(t, "of").value_or(0),
              why, str(command, "exit"), num(command, "seconds").value_or(0)) +
          "; ";
      const std::string result = str(t, "result");
      if (result == "correct") {
        lines += w.regen_correct;
      } else if (result == "failing") {
        lines += say(w.regen_failing, str(t, "error_kind"), condense(str(t, "error")));
      } else if (result == "unchanged") {
        lines += w.regen_unchanged;
      } else if (result == "no_file") {
        lines += w.regen_no_file;
      } else {
        lines += w.regen_not_judged;
      }
      lines += "\n";
    }
  }
  if (lines.empty()) return "";
  const Json& regenerate = sub(report, "regenerate");
  return "\n" + say(w.regen_title, num(regenerate, "max_tries").value_or(0)) + "\n\n" + lines;
}

std::string phase3_correctness(const Json& report, const Json& op, const Words& w) {
  const Json& tol = sub(op, "tolerance");
  std::string md = std::string(w.phase3_correct) + "\n\n";
  md += say(w.correct_intro, str(op, "reference"), num(report, "correct_trials").value_or(0),
            fmt::format("{:g}", num(tol, "atol").value_or(0)),
            fmt::format("{:g}", num(tol, "rtol").value_or(0)), str(op, "dtype")) +
        "\n\n";
  md += std::string(w.correct_header) + "\n|---|---|---|---|---|\n";
  std::string failures;
  for (const auto& row : sub(op, "rows")) {
    if (str(row, "kind") != "version") continue;
    const bool ok = row.value("correct", false);
    md += "| " + str(row, "kernel") + " | " + (ok ? "✅" : "❌") + " | " +
          std::to_string(static_cast<int>(num(row, "retries").value_or(0))) + " | " +
          error_value(sub(row, "max_abs_error")) + " | " + error_value(sub(row, "max_rel_error")) +
          " |\n";
    if (!ok) {
      const std::string kind = str(row, "error_kind");
      failures += "- **" + str(row, "kernel") + "**" + (kind.empty() ? "" : " (" + kind + ")") +
                  ": " + condense(str(row, "error")) + "\n";
    }
  }
  for (const auto& row : sub(op, "rows")) {  // a baseline that failed (torch.compile, say)
    if (str(row, "kind") == "baseline" && !row.value("correct", true)) {
      failures += "- **" + str(row, "kernel") + "**: " + condense(str(row, "error")) + "\n";
    }
  }
  if (!failures.empty()) md += std::string("\n") + w.failures + "\n\n" + failures;
  md += regeneration(report, op, w);
  return md;
}

std::string cell_value(const Json& row, const char* size, const char* key) {
  return ms(num(sub(sub(row, "sizes"), size), key));
}

std::string phase3_bench(const Json& report, const Json& op, const Words& w) {
  const bool interpreter = report.value("interpreter", false);
  std::string md = std::string(w.phase3_bench) + "\n\n";
  md += say(w.bench_intro, num(report, "runs").value_or(0),
            interpreter ? w.method_cpu : w.method_gpu) +
        "\n\n";
  md += "| Kernel | Small | Medium | Large | Final | Speedup |\n|---|---|---|---|---|---|\n";
  for (const auto& row : sub(op, "rows")) {
    md += "| " + kernel_cell(row) + " | " + cell_value(row, "small", "mean_ms") + " | " +
          cell_value(row, "medium", "mean_ms") + " | " + cell_value(row, "large", "mean_ms") +
          " | " + ms(num(row, "final_ms")) + " | " +
          (str(row, "kernel") == "torch" ? std::string("1.0x") : times(num(row, "speedup"))) +
          " |\n";
  }
  md += std::string("\n") + w.median_title + "\n\n" + size_header("Kernel") +
        " Final |\n|---|---|---|---|---|\n";
  for (const auto& row : sub(op, "rows")) {
    md += "| " + kernel_cell(row) + " | " + cell_value(row, "small", "median_ms") + " | " +
          cell_value(row, "medium", "median_ms") + " | " + cell_value(row, "large", "median_ms") +
          " | " + ms(num(row, "final_median_ms")) + " |\n";
  }
  md += std::string("\n") + w.speedup_title + "\n\n" + size_header("Kernel") +
        "\n|---|---|---|---|\n";
  for (const auto& row : sub(op, "rows")) {
    md += "| " + kernel_cell(row);
    for (const char* size : {"small", "medium", "large"}) {
      md += " | " + times(num(sub(sub(row, "sizes"), size), "speedup"));
    }
    md += " |\n";
  }
  if (sub(sub(op, "sizes"), "large").is_object()) {
    md += std::string("\n") + w.throughput_title + "\n\n" + w.throughput_header +
          "\n|---|---|---|---|\n";
    for (const auto& row : sub(op, "rows")) {
      const Json& cell = sub(sub(row, "sizes"), "large");
      const auto gbs = num(cell, "gbs");
      const auto tflops = num(cell, "tflops");
      md += "| " + kernel_cell(row) + " | " + (gbs ? fmt::format("{:.4g}", *gbs) : "—") + " | " +
            (tflops ? fmt::format("{:.4g}", *tflops) : "—") + " | " +
            percent_of_peak(report, op, cell) + " |\n";
    }
  }
  md += "\n![" + str(op, "op") + ": " + w.chart_alt + "](" + str(op, "op") + ".svg)\n";
  return md;
}

std::string phase4(const Json& op, const Words& w) {
  const Json& best = sub(op, "best");
  std::string md = std::string(w.phase4) + "\n\n";
  if (!best.is_object() || !best.contains("kernel") || best["kernel"].is_null()) {
    md += std::string("- **") + w.selected + "**: " + say(w.none_selected, str(best, "reason")) +
          "\n";
    return md;
  }
  const std::string kernel = str(best, "kernel");
  std::optional<double> torch_final;
  for (const auto& row : sub(op, "rows")) {
    if (str(row, "kernel") == "torch") torch_final = num(row, "final_ms");
  }
  md += std::string("- **") + w.selected + "**: " + kernel + "\n";
  std::string speed =
      say(w.speedup_line, times(num(best, "speedup")), ms(num(best, "final_ms")), ms(torch_final));
  const Json& ci = sub(best, "speedup_ci");
  if (ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number()) {
    speed += say(w.interval, times(ci[0].get<double>()), times(ci[1].get<double>()),
                 str(best, "speedup_verdict"));
  }
  if (num(best, "speedup_vs_compile"))
    speed += say(w.vs_compile, times(num(best, "speedup_vs_compile")));
  md += std::string("- **") + w.speedup + "**: " + speed + "\n";
  std::string analysis = say(w.lowest_final, kernel, num(best, "correct_versions").value_or(0));
  const Json& runner = sub(best, "runner_up");
  if (runner.is_object() && num(runner, "final_ms") && num(best, "final_ms")) {
    const double pct = 100.0 * (*num(runner, "final_ms") / *num(best, "final_ms") - 1.0);
    analysis += say(w.runner_up, str(runner, "kernel"), ms(num(runner, "final_ms")), pct);
  }
  std::string tied;
  for (const auto& name : sub(best, "tied_with")) {
    if (name.is_string()) tied += (tied.empty() ? "" : ", ") + name.get<std::string>();
  }
  if (!tied.empty()) analysis += say(w.tie, tied);
  analysis += ". ";
  const Json& large = sub(best, "large");
  const std::string unit = str(large, "unit");
  if (num(large, "percent_of_peak")) {
    const std::string peak_name = str(large, "peak_kind") == "matmul"
                                      ? say(w.matmul_peak, str(op, "dtype"))
                                      : std::string(w.copy_peak);
    analysis += say(w.at_large, fmt::format("{:.4g}", *num(large, "achieved")), unit,
                    *num(large, "percent_of_peak"), peak_name,
                    fmt::format("{:.4g}", *num(large, "peak")), unit);
  } else {
    analysis += say(w.no_peak, str(large, "reason"));
  }
  const Json& p = sub(op, "phase1");
  analysis += std::string(" ") + (str(p, "bound") == "compute" ? w.compute_bound : w.memory_bound) +
              ": " + str(p, "bound_reason");
  md += std::string("- **") + w.analysis + "**: " + analysis + "\n";
  return md;
}

std::string box(bool done, const std::string& text, const std::string& indent = "") {
  return indent + (done ? "- [x] " : "- [ ] ") + text + "\n";
}

// The checklist of one version: loaded, compiled, correct at each size, timed, faster than
// torch, and the regeneration loop's outcome.
std::string version_checklist(const Json& report, const Json& op, const Json& row, const Words& w) {
  const std::string kernel = str(row, "kernel");
  const std::string error = str(row, "error");
  const bool loaded = !error.starts_with("could not be loaded: ");
  std::string md = box(row.value("correct", false), "**" + kernel + "**");
  const std::string in = "  ";
  if (!loaded) {
    md += box(false, std::string(w.ck_not_loaded) + ": " + condense(error.substr(21)), in);
  } else {
    md += box(true, say(w.ck_loaded, str(row, "origin")), in);
    bool compiled = true;
    bool known = false;
    for (const auto& [size, cell] : sub(row, "sizes").items()) {
      if (cell.contains("compiled")) {
        known = true;
        compiled = compiled && cell.value("compiled", false);
      }
    }
    if (known) md += box(compiled, w.ck_compiled, in);
    for (const auto& name : sub(report, "sizes")) {  // in the order they were run
      const std::string size = name.is_string() ? name.get<std::string>() : "";
      const Json& cell = sub(sub(row, "sizes"), size.c_str());
      const bool ok = cell.value("correct", false);
      std::string text =
          say(w.ck_correct_at, size, str(sub(sub(op, "sizes"), size.c_str()), "label"));
      if (!ok) {
        const std::string kind = str(cell, "error_kind");
        text += ": " + (kind.empty() ? "" : kind + " — ") + condense(str(cell, "error", "not run"));
      }
      md += box(ok, text, in);
    }
    const auto final_ms = num(row, "final_ms");
    md += box(final_ms.has_value(),
              final_ms ? say(w.ck_timed, ms(final_ms)) : std::string(w.ck_not_timed), in);
    if (num(row, "speedup")) {
      const std::string verdict = str(row, "speedup_verdict", "?");
      md += box(verdict == "faster", say(w.ck_faster, times(num(row, "speedup")), verdict), in);
    }
  }
  const Json& tries = sub(row, "regeneration");
  if (tries.is_array() && !tries.empty()) {
    const Json& last = tries.back();
    const bool fixed = str(last, "result") == "correct";
    md += box(fixed,
              say(w.ck_regenerated, tries.size(),
                  fixed ? say(w.ck_regen_ok, num(last, "try").value_or(0))
                        : std::string(w.ck_regen_failing)),
              in);
  }
  return md;
}

std::string checklist(const Json& report, const Json& op, const Words& w) {
  std::string md = std::string(w.checklist) + "\n\n" + w.ck_intro + "\n\n";
  const Json& p = sub(op, "phase1");
  md += box(p.is_object(),
            say(w.ck_research, str(p, "bound") == "compute" ? w.compute_bound : w.memory_bound));
  for (const auto& row : sub(op, "rows")) {
    if (str(row, "kind") == "version") md += version_checklist(report, op, row, w);
  }
  for (const auto& row : sub(op, "rows")) {
    if (str(row, "kind") == "baseline") {
      md += box(num(row, "final_ms").has_value(), say(w.ck_baseline, str(row, "kernel")));
    }
  }
  const Json& best = sub(op, "best");
  if (best.is_object() && best.contains("kernel") && best["kernel"].is_string()) {
    md += box(true, say(w.ck_selected, str(best, "kernel")));
  } else {
    md += box(false, std::string(w.ck_none_selected) + ": " + str(best, "reason", "—"));
  }
  const Json& tests = sub(op, "tests");
  if (tests.is_object() && sub(tests, "dir").is_string()) {
    std::string files;
    bool all = true;
    for (const auto& [name, state] : sub(tests, "files").items()) {
      files += (files.empty() ? "" : ", ") + name + " (" + state.get<std::string>() + ")";
      all = all && state != "missing";
    }
    if (!str(tests, "note").empty()) files += "; " + condense(str(tests, "note"));
    md += box(all, say(w.ck_tests, str(tests, "dir"), files));
  } else if (tests.is_object()) {
    md += box(false, std::string(w.ck_no_tests) + ": " + str(tests, "note", "—"));
  }
  return md;
}

std::string meta_line(const Json& report, const Json& op, const Words& w) {
  return say(w.meta, str(report, "kforge_version"), str(report, "device"),
             str(report, "device_name"), str(op, "dtype"), num(report, "runs").value_or(0),
             str(report, "finished_at"));
}

std::string note(const Json& report, LogLang lang, const Words& w) {
  if (!report.value("interpreter", false)) return "";
  return (lang == LogLang::kKo ? std::string(w.note) : say(w.note, str(report, "timing_note"))) +
         "\n\n";
}

}  // namespace

std::string format_speedup(std::optional<double> v) {
  if (!v || !std::isfinite(*v) || *v <= 0) return "—";
  if (*v >= 0.1) return fmt::format("{:.2f}x", *v);
  if (*v < 1e-6) return "<0.000001x";
  // Two significant digits, in fixed notation: 0.0021x, 0.050x, 0.000031x.
  const int decimals = 1 - static_cast<int>(std::floor(std::log10(*v)));
  return fmt::format("{:.{}f}x", *v, decimals);
}

StatusOr<LogLang> parse_log_lang(std::string_view text, const std::string& field) {
  if (text == "en") return LogLang::kEn;
  if (text == "ko") return LogLang::kKo;
  return invalid_argument("'" + std::string(text) + "' is not en or ko", field);
}

std::string render_op_log(const Json& report, const Json& op, LogLang lang) {
  const Words& w = log_words(lang);
  std::string md = "# " + str(op, "title") + " " + w.title + "\n\n";
  md += meta_line(report, op, w) + "\n\n" + note(report, lang, w);
  md += phase1(op, w) + "\n" + phase2(op, lang, w) + "\n" + phase3_correctness(report, op, w) +
        "\n" + phase3_bench(report, op, w) + "\n" + phase4(op, w) + "\n" + checklist(report, op, w);
  return md;
}

std::string render_summary(const Json& report, LogLang lang) {
  const Words& w = log_words(lang);
  std::string sizes;
  for (const auto& s : sub(report, "sizes"))
    sizes += (sizes.empty() ? "" : ", ") + s.get<std::string>();
  std::string md = std::string(w.summary_title) + "\n\n" +
                   say(w.summary_meta, str(report, "kforge_version"), str(report, "device"),
                       str(report, "device_name"), num(report, "runs").value_or(0), sizes) +
                   "\n\n" + note(report, lang, w);
  md += std::string(w.summary_header) + "\n|---|---|---|---|---|---|---|\n";
  for (const auto& op : sub(report, "ops")) {
    const Json& best = sub(op, "best");
    const Json& large = sub(best, "large");
    std::string peak = "—";
    if (num(large, "percent_of_peak")) {
      peak = fmt::format("{:.1f} % {}", *num(large, "percent_of_peak"),
                         str(large, "peak_kind") == "matmul" ? w.of_matmul : w.of_copy);
    }
    md += "| " + str(op, "op") + " | " + str(best, "kernel", "—") + " | " +
          ms(num(best, "final_ms")) + " | " + times(num(best, "speedup")) + " | " +
          times(num(best, "speedup_vs_compile")) + " | " + peak + " | " +
          std::to_string(static_cast<int>(num(best, "correct_versions").value_or(0))) + "/" +
          std::to_string(static_cast<int>(num(best, "versions").value_or(0))) + " |\n";
  }
  const Json& peaks = sub(report, "peaks");
  std::string measured;
  if (num(sub(peaks, "copy"), "gbs")) {
    measured += fmt::format(" copy {:.4g} GB/s", *num(sub(peaks, "copy"), "gbs"));
  }
  for (const auto& [dtype, p] : sub(peaks, "matmul").items()) {
    if (num(p, "tflops"))
      measured += fmt::format(" · matmul {} {:.4g} TFLOP/s", dtype, *num(p, "tflops"));
  }
  if (!measured.empty()) md += std::string("\n") + w.summary_peaks + measured + "\n";
  return md;
}

StatusOr<std::map<std::string, std::string>> render_bench_files(const Json& report, LogLang lang) {
  if (!report.is_object() || !report.contains("ops") || !report["ops"].is_array()) {
    return invalid_argument("not a kforge bench report (no \"ops\" list)", "report");
  }
  std::map<std::string, std::string> files;
  try {
    for (size_t i = 0; i < report["ops"].size(); ++i) {
      const Json& op = report["ops"][i];
      const std::string name = str(op, "op");
      if (!is_op_name(name)) {
        return invalid_argument("ops[" + std::to_string(i) + "].op is not an op name", "report");
      }
      files[name + "_log.md"] = render_op_log(report, op, lang);
      files[name + ".svg"] = render_time_chart(op, sub(report, "sizes"));
    }
    files["summary.md"] = render_summary(report, lang);
  } catch (const Json::exception& e) {
    return invalid_argument(std::string("not a kforge bench report: ") + e.what(), "report");
  } catch (const fmt::format_error& e) {
    return internal_error(std::string("rendering the bench report: ") + e.what());
  }
  files["bench.json"] = report.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  return files;
}

Status write_bench_files(const std::map<std::string, std::string>& files,
                         const std::filesystem::path& dir) {
  KF_RETURN_IF_ERROR(make_dirs(dir));
  for (const auto& [name, content] : files) {
    KF_RETURN_IF_ERROR(write_file_atomic(dir / name, content));
  }
  return Status::ok();
}

}  // namespace kforge::bench
