// KernelBench runs (`kforge kernelbench`, POST /kernelbench, the MCP tool kernelbench_eval):
// the run layout's names, one record per judged sample, the summary (correctness rate, fast_p,
// geometric-mean speedup, per level), and the two files KernelBench's own scripts read:
// `eval_results.json` (scripts/eval_from_generations.py writes it, benchmark_eval_analysis.py
// reads it) and the baseline JSON of generate_baseline_time.py. Value code: no I/O.
//
// A sample record (one line of the per-sample JSONL):
//   {level, problem_id, sample_id, file, problem, source_sha256, problem_sha256, settings,
//    status: "judged" | "missing" | "unreadable" | "no_problem" | "not_judged" | "cancelled",
//    compiled, correct, reason, error_kind, runtime_ms, runtime_stats, ref_runtime_ms,
//    ref_runtime_stats, speedup, speedup_ci, speedup_verdict, flags: [{code, message}],
//    hardware, device, job_id}
// `flags` are the failed non-fatal honesty checks of a judged sample: a flagged sample may be
// correct, but it is never counted as fast.
//
// Example:
//   auto key = parse_sample_file_name("level_2_problem_17_sample_3_kernel.py");  // {2, 17, 3}
//   Json summary = summarize(records, {0.0, 1.0, 2.0});
//   Json kb = eval_results(records, 2);  // {"17": [{"sample_id": 3, "compiled": ..., ...}]}
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::bench::kernelbench {

struct SampleKey {
  int level = 0;
  int problem = 0;
  int sample = 0;
  auto operator<=>(const SampleKey&) const = default;
};

// "level_1_problem_19_sample_0_kernel.py" -> {1, 19, 0}; nullopt for any other name.
std::optional<SampleKey> parse_sample_file_name(std::string_view name);
std::string sample_file_name(const SampleKey& key);
// A KernelBench problem file, "19_ReLU.py" -> 19; nullopt for any other name.
std::optional<int> parse_problem_file_name(std::string_view name);

// The offset of the first byte of `text` that is not well-formed UTF-8 (RFC 3629); nullopt
// when it all is. A sample that is not UTF-8 text cannot be sent as JSON: it is unreadable.
std::optional<size_t> invalid_utf8_at(std::string_view text);

// "1-20,25" -> {1, ..., 20, 25} (sorted, unique, each ≥ 1 and ≤ 100000); kInvalidArgument
// naming `field` for anything else.
StatusOr<std::vector<int>> parse_id_list(std::string_view text, const std::string& field);
// "0,1,2,1.5" -> {0, 1, 1.5, 2} (sorted, unique, each ≥ 0); kInvalidArgument naming `field`.
StatusOr<std::vector<double>> parse_fast_p_list(std::string_view text, const std::string& field);

// What a record says about its sample besides the verdict.
struct SampleContext {
  SampleKey key;
  std::string file;            // the kernel file's name in the run directory
  std::string problem;         // the problem's file name, "19_ReLU.py" (empty: none)
  std::string source_sha256;   // of the kernel file (empty: not read)
  std::string problem_sha256;  // of the problem file
  std::string settings;        // what else the verdict depends on (device, trials, ...)
};

// The record of a sample whose job finished: `view` is its job_result_view (or a /batch
// result). A job that ended without a verdict (failed, cancelled) gives status "not_judged"
// or "cancelled" with the job's error as the reason.
Json judged_record(const SampleContext& context, const std::string& job_id, const Json& view);
// The record of a sample that was not submitted: `status` is "missing", "unreadable" or
// "no_problem"; `reason` says why in words.
Json unjudged_record(const SampleContext& context, std::string_view status,
                     std::string_view reason);

// True when `record` may be skipped on a re-run: judged, with the same source, problem and
// settings as `context`.
bool is_reusable(const Json& record, const SampleContext& context);

// A correct, unflagged sample whose speedup beats `p`: with `interval`, the low end of its 95 %
// interval is above p (where it has one); without, the point estimate is (KernelBench's rule).
bool is_fast(const Json& record, double p, bool interval);

// {"levels": {"1": LevelSummary, ...}, "all": LevelSummary, "fast_p": [p...]}, a LevelSummary
// being {samples, problems, judged, compiled, correct, flagged, not_judged, missing,
// correctness_rate, fast_p: {"fast_1": rate, ...}, fast_p_point: {...}, geomean_speedup,
// geomean_count}; rates are over every sample, as KernelBench divides by every problem.
Json summarize(const std::vector<Json>& records, const std::vector<double>& fast_p);
// The summary as the lines a terminal shows.
std::string render_summary(const Json& summary);

// KernelBench's eval_results.json for `level`'s records: {"<problem_id>": [{sample_id,
// compiled, correctness, metadata, runtime (mean ms, -1.0 when not timed), runtime_stats}]},
// problems in numeric order, samples by id.
Json eval_results(const std::vector<Json>& records, int level);

// A baseline entry as generate_baseline_time.py writes it, {mean, std, min, max, num_trials,
// hardware, device}, from a record's reference statistics; null when it has none.
Json baseline_entry(const Json& record);

}  // namespace kforge::bench::kernelbench
