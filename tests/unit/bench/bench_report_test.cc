#include "kforge/bench/bench_report.h"

#include <gtest/gtest.h>

#include "bench/bench_test_support.h"
#include "kforge/bench/bench_render.h"

namespace kforge::bench {
namespace {

using testing::health_with;
using testing::kernel_library;
using testing::timed_result;
using testing::wrong_result;

// A softmax bench on an H100 with every job's result chosen by the test.
class BenchReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BenchOptions o;
    o.ops = {"softmax"};
    o.library = kernel_library();
    o.runs = 10;
    auto plan = plan_bench(o, health_with({"cpu", "cuda:0"}));
    ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
    plan_ = *plan;
    outcomes_.resize(plan_.jobs.size());
  }

  // Sets the result of every job of `role` (and `version`) to `make(size)`.
  void set(JobRole role, const std::string& version,
           const std::function<Json(const std::string&)>& make) {
    for (size_t i = 0; i < plan_.jobs.size(); ++i) {
      const PlannedJob& j = plan_.jobs[i];
      if (j.role != role || j.version != version) continue;
      outcomes_[i] = JobOutcome{true, "job-" + std::to_string(i), "success", make(j.size), ""};
    }
  }
  static double scale(const std::string& size) {
    return size == "small" ? 1 : size == "medium" ? 4 : 40;
  }

  void fill_typical() {
    // The copy probe: 2 GiB in 0.7 ms (~3067 GB/s).
    outcomes_[0] = JobOutcome{true, "peak", "success", timed_result(0.7), ""};
    set(JobRole::kTorch, "", [](const std::string& s) { return timed_result(0.02 * scale(s)); });
    set(JobRole::kTorchCompile, "",
        [](const std::string& s) { return timed_result(0.0192 * scale(s)); });
    set(JobRole::kVersion, "v1_baseline",
        [](const std::string& s) { return timed_result(0.05 * scale(s)); });
    set(JobRole::kVersion, "v2_tiling", [](const std::string& s) {
      return s == "medium" ? wrong_result("output 'output': 3 of 4096 elements differ")
                           : timed_result(0.001);
    });
    set(JobRole::kVersion, "v3_coalesced",
        [](const std::string& s) { return timed_result(0.017 * scale(s)); });
    set(JobRole::kVersion, "v4_optimized",
        [](const std::string& s) { return timed_result(0.016 * scale(s)); });
  }

  Json report() { return build_report(plan_, outcomes_, 1'700'000'000'000, 1'700'000'060'000); }

  static const Json& row(const Json& op, const std::string& kernel) {
    for (const auto& r : op["rows"]) {
      if (r["kernel"] == kernel) return r;
    }
    static const Json kNone;
    ADD_FAILURE() << "no row " << kernel;
    return kNone;
  }

  BenchPlan plan_;
  std::vector<JobOutcome> outcomes_;
};

TEST_F(BenchReportTest, FinalIsTheMeanOfTheSizeMeansAndSpeedupIsAgainstTorch) {
  fill_typical();
  const Json r = report();
  EXPECT_EQ(r["device"], "cuda:0");
  EXPECT_EQ(r["device_name"], "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(r["timing_note"].is_null());
  const Json& op = r["ops"][0];
  const Json& torch = row(op, "torch");
  EXPECT_NEAR(torch["final_ms"].get<double>(), 0.02 * (1 + 4 + 40) / 3, 1e-12);
  EXPECT_NEAR(torch["final_median_ms"].get<double>(), 0.9 * 0.02 * 45 / 3, 1e-12);
  EXPECT_NEAR(torch["speedup"].get<double>(), 1.0, 1e-12);
  const Json& v4 = row(op, "v4_optimized");
  EXPECT_NEAR(v4["speedup"].get<double>(), 0.02 / 0.016, 1e-9);
  EXPECT_NEAR(v4["sizes"]["large"]["speedup"].get<double>(), 0.02 / 0.016, 1e-9);
  // 4096 x 4096 float32, read and written, in 0.64 ms.
  const double gbs = 2.0 * 4096 * 4096 * 4 / (0.64e-3) / 1e9;
  EXPECT_NEAR(v4["sizes"]["large"]["gbs"].get<double>(), gbs, 1e-6);
  EXPECT_EQ(v4["max_abs_error"], 1e-7);
}

TEST_F(BenchReportTest, AFailingVersionIsReportedAndNeverSelected) {
  fill_typical();
  const Json op = report()["ops"][0];
  const Json& v2 = row(op, "v2_tiling");  // the fastest, but wrong at medium
  EXPECT_FALSE(v2["correct"].get<bool>());
  EXPECT_EQ(v2["error"], "medium: output 'output': 3 of 4096 elements differ");
  EXPECT_EQ(v2["error_kind"], "mismatch");
  EXPECT_EQ(v2["max_rel_error"], "Infinity");
  EXPECT_TRUE(v2["final_ms"].is_null());
  const Json& best = op["best"];
  EXPECT_EQ(best["kernel"], "v4_optimized");
  EXPECT_EQ(best["correct_versions"], 3);
  EXPECT_EQ(best["runner_up"]["kernel"], "v3_coalesced");
  EXPECT_NEAR(best["speedup_vs_compile"].get<double>(), 0.0192 / 0.016, 1e-9);
  // % of the copy bandwidth measured by the probe.
  const Json& large = best["large"];
  EXPECT_EQ(large["peak_kind"], "copy_bandwidth");
  const double peak = 2.0 * (256 << 20) * 4 / 0.7e-3 / 1e9;
  EXPECT_NEAR(large["peak"].get<double>(), peak, 1e-6);
  EXPECT_NEAR(large["percent_of_peak"].get<double>(), 100 * large["achieved"].get<double>() / peak,
              1e-9);
}

TEST_F(BenchReportTest, AVersionsFailureNamesEveryFailingSize) {
  fill_typical();
  set(JobRole::kVersion, "v1_baseline", [](const std::string& s) {
    return s == "small" ? timed_result(0.05) : wrong_result("differs at " + s);
  });
  auto failure = version_failure(plan_, outcomes_, 0, "v1_baseline");
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->error_kind, "mismatch");
  EXPECT_EQ(failure->error, "medium: differs at medium\nlarge: differs at large");
  EXPECT_FALSE(version_failure(plan_, outcomes_, 0, "v4_optimized").has_value());
  plan_.ops[0].versions[3].load_error = "No such file";
  failure = version_failure(plan_, outcomes_, 0, "v4_optimized");
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->error_kind, "not_loaded");
}

TEST_F(BenchReportTest, TheLogEndsWithAChecklistOfWhatWasChecked) {
  fill_typical();
  const Json r = report();
  const Json& cell = row(r["ops"][0], "v2_tiling")["sizes"]["medium"];
  EXPECT_EQ(cell["compiled"], true);
  EXPECT_EQ(cell["error_kind"], "mismatch");
  auto files = render_bench_files(r, LogLang::kEn);
  ASSERT_TRUE(files.is_ok());
  const std::string& log = files->at("softmax_log.md");
  const size_t at = log.find("\n## Checklist\n");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string list = log.substr(at);
  for (const std::string& line : std::vector<std::string>{
           "- [x] Phase 1: research from the manifest (definition, inputs/outputs, complexity, "
           "Memory-bound)\n",
           "- [x] **v1_baseline**\n  - [x] loaded (`",
           "  - [x] compiled\n  - [x] correct at small (256x256)\n"
           "  - [x] correct at medium (1024x1024)\n  - [x] correct at large (4096x4096)\n"
           "  - [x] timed at every size: Final 0.75 ms\n  - [ ] faster than torch: 0.40x "
           "(slower)\n",
           "- [ ] **v2_tiling**\n",
           "  - [ ] correct at medium (1024x1024): mismatch — output 'output': 3 of 4096 elements "
           "differ\n",
           "  - [ ] timed at every size\n",
           "  - [x] faster than torch: 1.25x (faster)\n",
           "- [x] torch timed at every size\n- [x] torch.compile timed at every size\n",
           "- [x] best kernel selected: v4_optimized\n",
           "- [x] per-op tests in `" + (kernel_library() / "softmax" / "tests").string() +
               "`: conftest.py (kept), test_benchmark.py (kept), test_correctness.py (kept)\n",
       }) {
    EXPECT_NE(list.find(line), std::string::npos) << line << "\n" << list;
  }
  auto ko = render_bench_files(r, LogLang::kKo);
  ASSERT_TRUE(ko.is_ok());
  EXPECT_NE(ko->at("softmax_log.md").find("\n## 체크리스트\n"), std::string::npos);
  EXPECT_NE(ko->at("softmax_log.md").find("- [x] 최적 커널 선택: v4_optimized\n"),
            std::string::npos);
}

TEST_F(BenchReportTest, RegenerationTriesAreCountedReportedAndLogged) {
  fill_typical();
  plan_.regenerate = Json{{"command", "fix.sh"}, {"max_tries", 3}, {"timeout_s", 60}};
  const Json command = {{"exit", "exited with code 0"},
                        {"exit_code", 0},
                        {"timed_out", false},
                        {"seconds", 0.25},
                        {"output_tail", "ok"}};
  plan_.ops[0].regeneration["v2_tiling"] = Json::array(
      {Json{{"try", 1},
            {"of", 3},
            {"after", {{"error_kind", "mismatch"}, {"error", "medium: 3 of 4096 differ"}}},
            {"command", command},
            {"changed", true},
            {"result", "failing"},
            {"error_kind", "compile"},
            {"error", "small: SyntaxError: invalid syntax"}},
       Json{{"try", 2},
            {"of", 3},
            {"after", {{"error_kind", "compile"}, {"error", "small: SyntaxError"}}},
            {"command", command},
            {"changed", true},
            {"result", "correct"}}});
  plan_.ops[0].retries["v2_tiling"] = 1;  // the agent's own count adds up with the tries
  set(JobRole::kVersion, "v2_tiling", [](const std::string&) { return timed_result(0.001); });
  const Json r = report();
  EXPECT_EQ(r["regenerate"]["command"], "fix.sh");
  const Json& v2 = row(r["ops"][0], "v2_tiling");
  EXPECT_EQ(v2["retries"], 3);
  EXPECT_EQ(v2["regeneration"].size(), 2u);
  EXPECT_TRUE(v2["correct"].get<bool>());
  auto files = render_bench_files(r, LogLang::kEn);
  ASSERT_TRUE(files.is_ok());
  const std::string& log = files->at("softmax_log.md");
  for (const std::string& line : std::vector<std::string>{
           "| v2_tiling | ✅ | 3 |",
           "Regeneration (`--regenerate-cmd`, at most 3 tries per op):\n\n",
           "- **v2_tiling** try 1 of 3, after mismatch (medium: 3 of 4096 differ): the command "
           "exited with code 0 in 0.25 s; re-judged: ❌ compile: small: SyntaxError: invalid "
           "syntax\n",
           "- **v2_tiling** try 2 of 3, after compile: the command exited with code 0 in 0.25 s; "
           "re-judged: ✅ correct at every size\n",
           "  - [x] regenerated by --regenerate-cmd, tries: 2, correct after try 2\n",
       }) {
    EXPECT_NE(log.find(line), std::string::npos) << line << "\n" << log;
  }
}

TEST_F(BenchReportTest, TinySpeedupsKeepTheirDigits) {
  fill_typical();
  // The Triton interpreter against torch on cpu: about 0.002x.
  set(JobRole::kVersion, "v4_optimized",
      [](const std::string& s) { return timed_result(0.02 / 0.0021 * scale(s)); });
  for (const char* v : {"v1_baseline", "v2_tiling", "v3_coalesced"}) {
    set(JobRole::kVersion, v, [](const std::string&) { return wrong_result("wrong"); });
  }
  const Json r = report();
  auto files = render_bench_files(r, LogLang::kEn);
  ASSERT_TRUE(files.is_ok());
  EXPECT_NE(files->at("summary.md").find("| softmax | v4_optimized | 142.9 | 0.0021x |"),
            std::string::npos)
      << files->at("summary.md");
  EXPECT_NE(files->at("softmax_log.md").find("- **Speedup**: 0.0021x vs torch"), std::string::npos);
  EXPECT_EQ(files->at("softmax_log.md").find("0.00x"), std::string::npos);
}

TEST_F(BenchReportTest, JobsTheServiceCouldNotRunAreResultsWithTheirReason) {
  fill_typical();
  outcomes_[0] = JobOutcome{true, "peak", "failed", Json(), "no worker could start"};
  for (size_t i = 0; i < plan_.jobs.size(); ++i) {
    if (plan_.jobs[i].version == "v4_optimized" && plan_.jobs[i].size == "large") {
      outcomes_[i] = JobOutcome{true, "x", "cancelled", Json(), "cancelled by a client"};
    }
  }
  const Json op = report()["ops"][0];
  EXPECT_EQ(row(op, "v4_optimized")["error"], "large: the job cancelled: cancelled by a client");
  EXPECT_EQ(op["best"]["kernel"], "v3_coalesced");
  EXPECT_TRUE(op["best"]["large"]["percent_of_peak"].is_null());
  EXPECT_EQ(op["best"]["large"]["reason"],
            "the peak probe failed: the job failed: no worker could start");
}

TEST_F(BenchReportTest, NoCorrectVersionMeansNoSelection) {
  fill_typical();
  for (const char* v : {"v1_baseline", "v3_coalesced", "v4_optimized"}) {
    set(JobRole::kVersion, v, [](const std::string&) { return wrong_result("wrong"); });
  }
  const Json op = report()["ops"][0];
  EXPECT_TRUE(op["best"]["kernel"].is_null());
  EXPECT_EQ(op["best"]["reason"], "no version is correct at every size");
}

TEST_F(BenchReportTest, SpeedupsCarryTheirIntervalAndATieIsNotAWin) {
  fill_typical();
  const Json op = report()["ops"][0];
  // v4 is 1.25x torch; 10 trials of std 0.01 ms per size, 3 % systematic: clearly faster.
  const Json& v4 = row(op, "v4_optimized");
  ASSERT_TRUE(v4["speedup_ci"].is_array());
  EXPECT_LT(v4["speedup_ci"][0].get<double>(), 1.25);
  EXPECT_GT(v4["speedup_ci"][1].get<double>(), 1.25);
  EXPECT_EQ(v4["speedup_verdict"], "faster");
  EXPECT_EQ(row(op, "v1_baseline")["speedup_verdict"], "slower");
  EXPECT_EQ(v4["sizes"]["large"]["speedup_verdict"], "faster");
  EXPECT_FALSE(row(op, "torch").contains("speedup_ci"));
  EXPECT_EQ(op["best"]["speedup_verdict"], "faster");
  EXPECT_EQ(op["best"]["tied_with"], Json::array());  // v3 is 6 % slower: told apart

  // v3 within half a percent of v4: the lowest Final is still picked, the tie is said.
  set(JobRole::kVersion, "v3_coalesced",
      [](const std::string& s) { return timed_result(0.01608 * scale(s)); });
  const Json r = report();
  const Json& best = r["ops"][0]["best"];
  EXPECT_EQ(best["kernel"], "v4_optimized");
  EXPECT_EQ(best["tied_with"], Json::array({"v3_coalesced"}));
  auto files = render_bench_files(r, LogLang::kEn);
  ASSERT_TRUE(files.is_ok());
  const std::string& log = files->at("softmax_log.md");
  EXPECT_NE(log.find("a tie, not a win: v3_coalesced cannot be told apart"), std::string::npos)
      << log;
  EXPECT_NE(log.find("(95 % interval "), std::string::npos);
}

TEST_F(BenchReportTest, LogsHaveTheSkillsStructureInBothLanguages) {
  fill_typical();
  const Json r = report();
  for (LogLang lang : {LogLang::kEn, LogLang::kKo}) {
    auto files = render_bench_files(r, lang);
    ASSERT_TRUE(files.is_ok()) << files.status().to_string();
    EXPECT_EQ(files->size(), 4u);  // softmax_log.md, softmax.svg, summary.md, bench.json
    const std::string& log = files->at("softmax_log.md");
    const std::vector<std::string> headings =
        lang == LogLang::kEn
            ? std::vector<std::string>{"# torch.softmax Triton kernel development log\n",
                                       "\n## Phase 1: Research and analysis\n",
                                       "\n## Phase 2: Kernel writing\n",
                                       "\n## Phase 3: Correctness Check\n",
                                       "\n## Phase 3: Benchmark results\n",
                                       "\n## Phase 4: Best kernel\n"}
            : std::vector<std::string>{"# torch.softmax Triton Kernel 개발 로그\n",
                                       "\n## Phase 1: 자료 조사 및 분석\n",
                                       "\n## Phase 2: 커널 작성\n",
                                       "\n## Phase 3: Correctness Check\n",
                                       "\n## Phase 3: 벤치마크 결과\n",
                                       "\n## Phase 4: 최적 커널\n"};
    size_t at = 0;
    for (const auto& h : headings) {
      const size_t found = log.find(h, at);
      ASSERT_NE(found, std::string::npos) << h << "\n" << log;
      at = found;
    }
    EXPECT_NE(log.find("| Kernel | Small | Medium | Large | Final | Speedup |"), std::string::npos);
    EXPECT_NE(log.find("| torch | 0.02 | 0.08 | 0.8 | 0.3 | 1.0x |"), std::string::npos) << log;
    EXPECT_NE(log.find("| v4_optimized | 0.016 | 0.064 | 0.64 | 0.24 | 1.25x |"), std::string::npos)
        << log;
    EXPECT_NE(log.find("| v2_tiling ❌ |"), std::string::npos);
    EXPECT_NE(log.find("### v1_baseline — "), std::string::npos);
    EXPECT_NE(log.find("![softmax: "), std::string::npos);
    if (lang == LogLang::kKo) {
      EXPECT_NE(log.find("### v1_baseline — BLOCK_SIZE: 1024, 최적화 없음"), std::string::npos);
      for (const char* label : {"수학적 정의", "입력/출력", "계산 복잡도", "선택된 커널",
                                "**Speedup**", "분석", "재시도", "최대 절대 오차"}) {
        EXPECT_NE(log.find(label), std::string::npos) << label;
      }
    } else {
      for (const char* label :
           {"Mathematical definition", "Inputs/outputs", "Computational complexity",
            "Selected kernel", "**Speedup**", "Analysis", "Retries", "Max abs error"}) {
        EXPECT_NE(log.find(label), std::string::npos) << label;
      }
    }
    EXPECT_NE(log.find("- **v2_tiling** (mismatch): medium: output 'output': 3 of 4096"),
              std::string::npos)
        << log;
    const std::string& summary = files->at("summary.md");
    EXPECT_NE(summary.find("| softmax | v4_optimized | 0.24 | 1.25x | 1.20x |"), std::string::npos)
        << summary;
    const std::string& svg = files->at("softmax.svg");
    EXPECT_TRUE(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    EXPECT_NE(svg.find("<title>v4_optimized large: 0.64 ms</title>"), std::string::npos);
    EXPECT_NE(svg.find("v2_tiling (failed)"), std::string::npos);
  }
}

TEST_F(BenchReportTest, ACpuReportSaysItsTimingsAreNotGpuTimings) {
  BenchOptions o;
  o.ops = {"softmax"};
  o.library = kernel_library();
  o.sizes = {"small"};
  auto plan = plan_bench(o, health_with({"cpu"}));
  ASSERT_TRUE(plan.is_ok());
  const Json r = build_report(*plan, std::vector<JobOutcome>(plan->jobs.size()), 0, 0);
  EXPECT_TRUE(r["interpreter"].get<bool>());
  EXPECT_NE(r["timing_note"].get<std::string>().find("not GPU timings"), std::string::npos);
  auto files = render_bench_files(r, LogLang::kEn);
  ASSERT_TRUE(files.is_ok());
  EXPECT_NE(files->at("softmax_log.md")
                .find("> **Note:** cpu device: Triton ran in its "
                      "interpreter"),
            std::string::npos);
  EXPECT_NE(files->at("summary.md").find("not GPU timings"), std::string::npos);
  auto ko = render_bench_files(r, LogLang::kKo);
  EXPECT_NE(ko->at("softmax_log.md").find("GPU 시간이 아니므로"), std::string::npos);
}

TEST(BenchRenderTest, SpeedupsAreNeverAMisleadingZero) {
  EXPECT_EQ(format_speedup(1.254), "1.25x");
  EXPECT_EQ(format_speedup(0.1), "0.10x");
  EXPECT_EQ(format_speedup(0.05), "0.050x");
  EXPECT_EQ(format_speedup(0.0021), "0.0021x");
  EXPECT_EQ(format_speedup(0.00214), "0.0021x");
  EXPECT_EQ(format_speedup(0.0000314), "0.000031x");
  EXPECT_EQ(format_speedup(4e-9), "<0.000001x");
  EXPECT_EQ(format_speedup(std::nullopt), "—");
  EXPECT_EQ(format_speedup(0.0), "—");
}

TEST(BenchRenderTest, AForeignReportIsRefusedAndCannotNameFilesOutsideTheDirectory) {
  EXPECT_FALSE(render_bench_files(Json::array(), LogLang::kEn).is_ok());
  const Json hostile = {{"ops", {{{"op", "../../etc/passwd"}}}}};
  auto files = render_bench_files(hostile, LogLang::kEn);
  ASSERT_FALSE(files.is_ok());
  EXPECT_EQ(files.status().field_path(), "report");
  auto lang = parse_log_lang("fr");
  ASSERT_FALSE(lang.is_ok());
  EXPECT_EQ(lang.status().field_path(), "log_lang");
}

}  // namespace
}  // namespace kforge::bench
