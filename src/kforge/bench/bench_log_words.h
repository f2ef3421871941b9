// The fixed wording of a bench development log (bench_render.h), per language: one table
// of format strings in English and one with the skill's original Korean headings
// (docs/compatibility.md §3). A field's comment names the arguments its pattern takes, in
// order; the renderer fills them with fmt. Only bench_render.cc reads it.
#pragma once

#include "kforge/bench/bench_render.h"

namespace kforge::bench {

// The fixed text of a log. Headings follow the skill: its original Korean ones, and their
// English translations.
struct Words {
  const char* title;  // after "# torch.<op> "
  const char* meta;   // version, device, name, dtype, runs, finished
  const char* note;
  const char* phase1;
  const char* definition;
  const char* io;
  const char* complexity;
  const char* bound;
  const char* memory_bound;
  const char* compute_bound;
  const char* sizes;
  const char* size_cost;  // bytes, flops
  const char* size_mapping;
  const char* phase2;
  const char* from_library;  // op
  const char* from_inline;
  const char* from_dir;  // dir, op
  const char* source;
  const char* not_loaded;
  const char* no_summary;
  const char* phase3_correct;
  const char* correct_intro;  // reference, trials, atol, rtol, dtype
  const char* correct_header;
  const char* failures;
  const char* phase3_bench;
  const char* bench_intro;  // runs, method
  const char* method_gpu;
  const char* method_cpu;
  const char* median_title;
  const char* speedup_title;
  const char* throughput_title;
  const char* throughput_header;
  const char* chart_alt;
  const char* phase4;
  const char* selected;
  const char* speedup;
  const char* speedup_line;  // x, kernel ms, torch ms
  const char* vs_compile;    // y
  const char* analysis;
  const char* lowest_final;  // kernel, n
  const char* runner_up;     // kernel, ms, pct
  const char* interval;      // low, high, verdict
  const char* tie;           // kernels
  const char* at_large;      // achieved {0}, unit {1}, pct {2}, peak name {3}, peak {4}, unit {5}
  const char* copy_peak;
  const char* matmul_peak;    // dtype
  const char* no_peak;        // reason
  const char* none_selected;  // reason
  const char* summary_title;
  const char* summary_meta;  // version, device, name, runs, sizes
  const char* summary_header;
  const char* summary_peaks;
  const char* of_copy;
  const char* of_matmul;
  const char* checklist;
  const char* ck_intro;
  const char* ck_research;  // bound
  const char* ck_loaded;    // origin
  const char* ck_not_loaded;
  const char* ck_compiled;
  const char* ck_correct_at;  // size, label
  const char* ck_timed;       // final ms
  const char* ck_not_timed;
  const char* ck_faster;       // speedup, verdict
  const char* ck_regenerated;  // tries, outcome
  const char* ck_regen_ok;     // try
  const char* ck_regen_failing;
  const char* ck_baseline;  // kernel
  const char* ck_selected;  // kernel
  const char* ck_none_selected;
  const char* ck_tests;  // dir, files
  const char* ck_no_tests;
  const char* regen_title;  // max tries
  const char* regen_try;    // {0} kernel, {1} try, {2} of, {3} after, {4} how, {5} seconds
  const char* regen_correct;
  const char* regen_failing;  // kind, error
  const char* regen_unchanged;
  const char* regen_no_file;
  const char* regen_not_judged;
};

// The table of `lang`.
const Words& log_words(LogLang lang);

}  // namespace kforge::bench
