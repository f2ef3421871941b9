// Renders a bench report (bench_report.h) as the files `kforge bench` writes:
//   <op>_log.md   the skill's development log, Phase 1-4 and a checklist of what was checked
//                 (loaded, compiled, correct at each size, timed, faster than torch,
//                 regenerated, selected, per-op tests), in English or with the skill's
//                 original Korean headings (docs/bench.md shows both)
//   <op>.svg      time per size per kernel (svg_chart.h)
//   summary.md    one line per op
//   bench.json    the report itself
// Rendering reads only the report, so a saved bench.json renders again in either language.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::bench {

enum class LogLang { kEn, kKo };

// "en" or "ko"; kInvalidArgument naming `field` otherwise.
StatusOr<LogLang> parse_log_lang(std::string_view text, const std::string& field = "log_lang");

// A speedup for people: "1.35x"; below 0.1x two significant digits in fixed notation
// ("0.0021x", the Triton interpreter against torch on cpu), below 0.000001x "<0.000001x":
// never a misleading "0.00x". "—" for a missing or non-positive value.
std::string format_speedup(std::optional<double> speedup);

std::string render_op_log(const Json& report, const Json& op, LogLang lang);
std::string render_summary(const Json& report, LogLang lang);

// File name -> content, for every file above. kInvalidArgument when `report` is not a bench
// report (a hand-edited or foreign bench.json).
StatusOr<std::map<std::string, std::string>> render_bench_files(const Json& report, LogLang lang);

// Creates `dir` and writes the files into it (each atomically).
Status write_bench_files(const std::map<std::string, std::string>& files,
                         const std::filesystem::path& dir);

}  // namespace kforge::bench
