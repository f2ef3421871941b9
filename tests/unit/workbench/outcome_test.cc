#include "kforge/workbench/outcome.h"

#include <gtest/gtest.h>

#include "kforge/workbench/session.h"

namespace kforge::workbench {
namespace {

model::JobRecord job(Json result, model::JobState state = model::JobState::kSucceeded) {
  model::JobRecord j;
  j.id = "job-1";
  j.state = state;
  j.device = "cuda:0";
  j.result = std::move(result);
  return j;
}

Json timed(double median_ms) {
  return Json{
      {"compiled", true},
      {"correctness", true},
      {"runtime_stats", {{"median", median_ms}, {"trials", 50}}},
      {"metadata",
       {{"inputs", Json::array({{{"name", "arg0"}, {"shape", {1024, 1024}}, {"dtype", "float16"}},
                                {{"name", "arg1"}, {"type", "dict"}}})}}}};
}

const InputCase kCase{0, "1024x1024", {1024, 1024}};

TEST(Outcome, VerdictsSayWhoFailed) {
  Json compile = {{"compiled", false},
                  {"error_kind", "compile"},
                  {"compilation_error", "  File \"/tmp/x/candidate.py\", line 7\nSyntaxError"}};
  CaseOutcome c = interpret_job(kCase, job(compile), "kernel/softmax_v2.py");
  EXPECT_EQ(c.verdict, "compile_error");
  EXPECT_EQ(c.correct, false);
  EXPECT_NE(c.error.find("\"kernel/softmax_v2.py\", line 7"), std::string::npos) << c.error;

  Json reference = {{"compiled", true},
                    {"error_kind", "compile"},
                    {"compilation_error", "reference kernel: failed to import"}};
  c = interpret_job(kCase, job(reference), "k");
  EXPECT_EQ(c.verdict, "reference_error");
  EXPECT_FALSE(c.correct.has_value());  // no verdict on the kernel

  Json inputs = {{"compiled", true},
                 {"error_kind", "runtime"},
                 {"runtime_error", "could not build the inputs of trial 1/5: NameError"}};
  c = interpret_job(kCase, job(inputs), "k");
  EXPECT_EQ(c.verdict, "input_error");
  EXPECT_FALSE(c.correct.has_value());

  Json wrong = {{"compiled", true},
                {"correctness", false},
                {"error_kind", "mismatch"},
                {"validation_error", "3 of 8 elements differ"},
                {"correctness_details", {{"max_abs_error", 0.5}}}};
  c = interpret_job(kCase, job(wrong), "k");
  EXPECT_EQ(c.verdict, "mismatch");
  EXPECT_EQ(c.correct, false);
  EXPECT_EQ(c.correctness["max_abs_error"], 0.5);

  c = interpret_job(kCase, job(Json(), model::JobState::kFailed), "k");
  EXPECT_EQ(c.verdict, "job_failed");
  EXPECT_FALSE(c.correct.has_value());
}

TEST(Outcome, RooflineUsesTheOpFormulasAndTheMeasuredPeaks) {
  const Json op = {{"bytes", "2 * bytes(0)"}, {"flops", "5 * numel(0)"}, {"bound", "memory"}};
  CaseOutcome c = interpret_job(kCase, job(timed(0.002)), "k");
  ASSERT_EQ(c.inputs.size(), 1u);  // the kwargs marker is not a tensor
  EXPECT_EQ(c.input_summary[1]["name"], "kwargs");
  const Json peaks = {{"bandwidth_gb_s", 3000.0}, {"flop_s", {{"fp16", 7.0e14}}}};
  add_roofline(c, &op, peaks);
  const double bytes = 2.0 * 1024 * 1024 * 2;
  EXPECT_DOUBLE_EQ(c.roofline["bytes"].get<double>(), bytes);
  EXPECT_NEAR(c.roofline["achieved_gb_s"].get<double>(), bytes / 2e-6 / 1e9, 1e-6);
  EXPECT_NEAR(c.roofline["pct_of_peak_bandwidth"].get<double>(),
              100.0 * bytes / 2e-6 / 1e9 / 3000.0, 1e-6);
  EXPECT_EQ(c.roofline["peak_flops_dtype"], "fp16");

  CaseOutcome unknown = interpret_job(kCase, job(timed(0.002)), "k");
  add_roofline(unknown, &op, Json());
  EXPECT_FALSE(unknown.roofline.contains("pct_of_peak_bandwidth"));
  EXPECT_NE(unknown.roofline["peak"].get<std::string>().find("unknown"), std::string::npos);

  for (const Json& odd : {Json{{"error", "measurement failed"}},
                          Json{{"bandwidth_gb_s", nullptr}, {"flop_s", {{"fp32", "fast"}}}}}) {
    CaseOutcome c2 = interpret_job(kCase, job(timed(0.002)), "k");
    add_roofline(c2, &op, odd);
    EXPECT_FALSE(c2.roofline.contains("pct_of_peak_bandwidth")) << odd.dump();
    EXPECT_FALSE(c2.roofline.contains("pct_of_peak_flops")) << odd.dump();
    EXPECT_TRUE(c2.roofline.contains("peak")) << odd.dump();
  }

  CaseOutcome unnamed = interpret_job(kCase, job(timed(0.002)), "k");
  add_roofline(unnamed, nullptr, peaks);
  EXPECT_TRUE(unnamed.roofline["bytes"].is_null());
}

}  // namespace
}  // namespace kforge::workbench

namespace kforge::workbench {
namespace {

TEST(Outcome, SpeedupsKeepTheirIntervalAndVerdict) {
  Json r = timed(0.5);
  r["speedup"] = 1.02;
  r["speedup_ci"] = {0.97, 1.06};
  r["speedup_verdict"] = "indistinguishable";
  const CaseOutcome c = interpret_job(kCase, job(r), "kernel/add_v1.py");
  const Json j = c.to_json();
  EXPECT_EQ(j["speedup_ci"], Json::array({0.97, 1.06}));
  EXPECT_EQ(j["speedup_verdict"], "indistinguishable");
  EXPECT_EQ(case_speedup_cell(j), "1.02x (0.97-1.06, indistinguishable)");
  EXPECT_EQ(case_speedup_cell(Json{{"speedup", 2.0}}), "2x");
  EXPECT_EQ(case_speedup_cell(Json::object()), "-");
}

// A correct version timed at one size: median `ms`, std `std_ms` over `trials`.
Version timed_version(int number, double ms, double std_ms, int trials) {
  Version v;
  v.number = number;
  v.results["validation"] = {{"passed", true}, {"at_ms", 1}};
  v.results["timing"] = {
      {"ok", true},
      {"at_ms", 2},
      {"cases",
       Json::array({{{"label", "n"},
                     {"median_ms", ms},
                     {"timing", {{"median_ms", ms}, {"std_ms", std_ms}, {"trials", trials}}}}})}};
  return v;
}

TEST(SessionBest, VersionsWithinTheNoiseTieWithTheBest) {
  Session s;
  s.settings.device = "cuda:0";
  s.versions = {timed_version(1, 1.00, 0.01, 100), timed_version(2, 0.99, 0.01, 100),
                timed_version(3, 0.80, 0.01, 100)};
  EXPECT_EQ(s.best()->number, 3);
  EXPECT_TRUE(s.tied_with_best().empty());  // 20 % apart: a win
  s.versions[2] = timed_version(3, 0.985, 0.01, 100);
  EXPECT_EQ(s.best()->number, 3);
  EXPECT_EQ(s.tied_with_best(), (std::vector<int>{1, 2}));  // within 3 %: ties
  // On cpu the systematic error is 10 %: 0.8 against 0.99 is still apart, 0.92 is not.
  s.settings.device = "cpu";
  s.versions[2] = timed_version(3, 0.92, 0.01, 100);
  EXPECT_EQ(s.tied_with_best(), (std::vector<int>{1, 2}));
  s.versions[2] = timed_version(3, 0.80, 0.01, 100);
  EXPECT_TRUE(s.tied_with_best().empty());
}

}  // namespace
}  // namespace kforge::workbench
