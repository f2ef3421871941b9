#include "kforge/bench/kernelbench.h"

#include <gtest/gtest.h>

namespace kforge::bench::kernelbench {
namespace {

SampleContext context(int level, int problem, int sample) {
  return SampleContext{{level, problem, sample},
                       sample_file_name({level, problem, sample}),
                       std::to_string(problem) + "_Op.py",
                       "src-sha",
                       "problem-sha",
                       "device=cpu"};
}

// A finished compare's job_result_view, as /batch answers it.
Json view(bool correct, double speedup, Json ci, Json checks = Json::array()) {
  Json stats = {{"mean", 2.0},   {"median", 1.9},         {"std", 0.1}, {"min", 1.8}, {"max", 2.5},
                {"trials", 100}, {"method", "cuda_event"}};
  Json ref = stats;
  ref["mean"] = 2.0 * speedup;
  return Json{{"state", "success"},
              {"kernel_exec_result",
               {{"compiled", true},
                {"correctness", correct},
                {"runtime_stats", stats},
                {"ref_runtime", ref},
                {"speedup", speedup},
                {"speedup_ci", ci},
                {"checks", checks},
                {"error_kind", correct ? Json() : Json("mismatch")},
                {"validation_error", correct ? "" : "max_abs_error 3.0 > atol"},
                {"metadata", {{"gpu_type", "NVIDIA H200"}, {"device", "cuda:0"}}}}}};
}

Json record(int problem, int sample, const Json& v) {
  return judged_record(context(1, problem, sample), "job-" + std::to_string(problem), v);
}

TEST(KernelbenchTest, SampleFileNamesFollowTheRunLayout) {
  auto key = parse_sample_file_name("level_2_problem_17_sample_3_kernel.py");
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->level, 2);
  EXPECT_EQ(key->problem, 17);
  EXPECT_EQ(key->sample, 3);
  EXPECT_EQ(sample_file_name(*key), "level_2_problem_17_sample_3_kernel.py");
  for (const char* bad :
       {"level_2_problem_17_sample_3_kernel.pyc", "level_2_problem_x_sample_3_kernel.py",
        "level__problem_1_sample_0_kernel.py", "level_1_problem_1_sample_0.py",
        "level_1_problem_1_sample_-1_kernel.py", "notes.py", ""}) {
    EXPECT_FALSE(parse_sample_file_name(bad).has_value()) << bad;
  }
  EXPECT_EQ(parse_problem_file_name("19_ReLU.py"), 19);
  EXPECT_FALSE(parse_problem_file_name("ReLU.py").has_value());
  EXPECT_FALSE(parse_problem_file_name("19_ReLU.txt").has_value());
  EXPECT_FALSE(parse_problem_file_name("0_Zero.py").has_value());
}

TEST(KernelbenchTest, Utf8IsCheckedByteByByte) {
  EXPECT_FALSE(invalid_utf8_at("plain ascii").has_value());
  EXPECT_FALSE(invalid_utf8_at("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80").has_value());
  EXPECT_EQ(invalid_utf8_at("ab\xff"), 2u);
  EXPECT_EQ(invalid_utf8_at("a\xc3"), 1u);             // cut short
  EXPECT_EQ(invalid_utf8_at("\xc0\xaf"), 0u);          // overlong
  EXPECT_EQ(invalid_utf8_at("x\xed\xa0\x80"), 1u);     // a surrogate
  EXPECT_EQ(invalid_utf8_at("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(invalid_utf8_at("\xe2\x28\xa1"), 0u);      // a bad continuation
}

TEST(KernelbenchTest, IdListsAreRangesAndBadOnesNameTheField) {
  auto ids = parse_id_list("3,1-4,9", "problems");
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, (std::vector<int>{1, 2, 3, 4, 9}));
  for (const char* bad : {"", "1,", "4-2", "0", "a", "1-x", "1--3"}) {
    auto r = parse_id_list(bad, "problems");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().field_path(), "problems");
  }
  auto ps = parse_fast_p_list("1.5,0.5,1.5", "fast_p");
  ASSERT_TRUE(ps.is_ok());
  EXPECT_EQ(*ps, (std::vector<double>{0.5, 1.5}));
  EXPECT_FALSE(parse_fast_p_list("-1", "fast_p").is_ok());
  EXPECT_FALSE(parse_fast_p_list("fast", "fast_p").is_ok());
}

TEST(KernelbenchTest, AJudgedRecordKeepsTheVerdictTimesAndFlags) {
  Json checks = Json::array({{{"name", "inputs_unchanged"}, {"passed", true}, {"fatal", true}},
                             {{"name", "speedup_plausible"},
                              {"passed", false},
                              {"fatal", false},
                              {"message", "12x beyond the roofline"}}});
  Json r = record(4, 1, view(true, 12.0, {11.0, 13.0}, checks));
  EXPECT_EQ(r["status"], "judged");
  EXPECT_EQ(r["correct"], true);
  EXPECT_EQ(r["job_id"], "job-4");
  EXPECT_DOUBLE_EQ(r["runtime_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(r["ref_runtime_ms"].get<double>(), 24.0);
  EXPECT_EQ(r["hardware"], "NVIDIA H200");
  ASSERT_EQ(r["flags"].size(), 1u);
  EXPECT_EQ(r["flags"][0]["code"], "speedup_plausible");
  EXPECT_FALSE(is_fast(r, 1.0, true));  // flagged: never fast
  EXPECT_FALSE(is_fast(r, 1.0, false));

  Json wrong = record(4, 2, view(false, 1.0, nullptr));
  EXPECT_EQ(wrong["reason"], "max_abs_error 3.0 > atol");
  EXPECT_EQ(wrong["error_kind"], "mismatch");

  Json failed = judged_record(
      context(1, 4, 3), "job-x",
      Json{{"state", "failed"}, {"kernel_exec_result", Json::object()}, {"error", "worker died"}});
  EXPECT_EQ(failed["status"], "not_judged");
  EXPECT_EQ(failed["reason"], "worker died");
  Json cancelled = judged_record(context(1, 4, 3), "job-y", Json{{"state", "cancelled"}});
  EXPECT_EQ(cancelled["status"], "cancelled");
  Json stopped = judged_record(context(1, 4, 3), "job-z",
                               Json{{"state", "success"},
                                    {"kernel_exec_result",
                                     {{"compiled", true},
                                      {"correctness", false},
                                      {"error_kind", "cancelled"},
                                      {"runtime_error", "cancelled while it ran"}}}});
  EXPECT_EQ(stopped["status"], "cancelled");  // judged again on a re-run
  EXPECT_EQ(stopped["reason"], "cancelled while it ran");
  EXPECT_FALSE(is_reusable(stopped, context(1, 4, 3)));
}

TEST(KernelbenchTest, FastNeedsTheWholeIntervalAboveP) {
  // Identical kernels: a point estimate a hair above 1, an interval around it.
  Json same = record(1, 0, view(true, 1.02, {0.97, 1.07}));
  EXPECT_TRUE(is_fast(same, 0.0, true));
  EXPECT_FALSE(is_fast(same, 1.0, true));
  EXPECT_TRUE(is_fast(same, 1.0, false));  // KernelBench's rule counts it
  Json faster = record(2, 0, view(true, 2.5, {2.2, 2.8}));
  EXPECT_TRUE(is_fast(faster, 2.0, true));
  Json no_ci = record(3, 0, view(true, 1.5, nullptr));
  EXPECT_TRUE(is_fast(no_ci, 1.0, true));
}

TEST(KernelbenchTest, SummaryRatesAreOverEverySampleAndFlagsAreCounted) {
  Json flag = Json::array(
      {{{"name", "launched_own_kernel"}, {"passed", false}, {"fatal", false}, {"message", "m"}}});
  std::vector<Json> records = {
      record(1, 0, view(true, 1.02, {0.97, 1.07})),        // correct, not fast_1
      record(2, 0, view(true, 4.0, {3.5, 4.5})),           // correct, fast_2
      record(3, 0, view(true, 50.0, {45.0, 55.0}, flag)),  // flagged hack
      record(4, 0, view(false, 1.0, nullptr)),             // wrong
      unjudged_record(context(1, 5, 0), "missing", "no file"),
  };
  records.push_back(judged_record(context(2, 1, 0), "j", view(true, 1.0, {0.9, 1.1})));
  Json s = summarize(records, {0.0, 1.0, 2.0});
  const Json& l1 = s["levels"]["1"];
  EXPECT_EQ(l1["samples"], 5);
  EXPECT_EQ(l1["problems"], 5);
  EXPECT_EQ(l1["judged"], 4);
  EXPECT_EQ(l1["missing"], 1);
  EXPECT_EQ(l1["correct"], 3);
  EXPECT_EQ(l1["flagged"], 1);
  EXPECT_DOUBLE_EQ(l1["correctness_rate"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(l1["fast_p"]["fast_0"].get<double>(), 0.4);  // the flagged one is not
  EXPECT_DOUBLE_EQ(l1["fast_p"]["fast_1"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(l1["fast_p"]["fast_2"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(l1["fast_p_point"]["fast_1"].get<double>(), 0.4);
  // Geometric mean over the correct, unflagged samples: sqrt(1.02 * 4).
  EXPECT_NEAR(l1["geomean_speedup"].get<double>(), std::sqrt(1.02 * 4.0), 1e-9);
  EXPECT_EQ(l1["geomean_count"], 2);
  EXPECT_EQ(s["levels"]["2"]["samples"], 1);
  EXPECT_EQ(s["all"]["samples"], 6);
  EXPECT_EQ(s["all"]["problems"], 6);
  const std::string table = render_summary(s);
  EXPECT_NE(table.find("fast_1"), std::string::npos);
  EXPECT_NE(table.find("all"), std::string::npos);
}

TEST(KernelbenchTest, EvalResultsHaveKernelBenchsShape) {
  std::vector<Json> records = {record(10, 1, view(true, 2.0, {1.8, 2.2})),
                               record(10, 0, view(false, 1.0, nullptr)),
                               unjudged_record(context(1, 9, 0), "missing", "no file x"),
                               judged_record(context(2, 1, 0), "j", view(true, 1.0, nullptr))};
  Json kb = eval_results(records, 1);
  ASSERT_TRUE(kb.contains("10"));
  ASSERT_TRUE(kb.contains("9"));
  EXPECT_FALSE(kb.contains("1"));  // level 2's
  ASSERT_EQ(kb["10"].size(), 2u);
  const Json& first = kb["10"][0];
  EXPECT_EQ(first["sample_id"], 0);
  EXPECT_EQ(first["correctness"], false);
  EXPECT_DOUBLE_EQ(first["runtime"].get<double>(), -1.0);  // not timed as a correct kernel
  EXPECT_EQ(first["metadata"]["correctness_issue"], "max_abs_error 3.0 > atol");
  const Json& second = kb["10"][1];
  EXPECT_EQ(second["correctness"], true);
  EXPECT_DOUBLE_EQ(second["runtime"].get<double>(), 2.0);
  for (const char* key : {"mean", "std", "min", "max", "num_trials", "hardware", "device"})
    EXPECT_TRUE(second["runtime_stats"].contains(key)) << key;
  EXPECT_EQ(kb["9"][0]["compiled"], false);
  EXPECT_EQ(kb["9"][0]["metadata"]["compilation_error"], "no file x");

  Json base = baseline_entry(records[0]);
  EXPECT_DOUBLE_EQ(base["mean"].get<double>(), 4.0);
  EXPECT_EQ(base["num_trials"], 100);
  EXPECT_EQ(base["hardware"], "NVIDIA H200");
  EXPECT_TRUE(baseline_entry(records[2]).is_null());
}

TEST(KernelbenchTest, OnlyAJudgedRecordOfTheSameSourceAndSettingsIsReused) {
  Json r = record(1, 0, view(true, 1.0, nullptr));
  EXPECT_TRUE(is_reusable(r, context(1, 1, 0)));
  SampleContext edited = context(1, 1, 0);
  edited.source_sha256 = "other";
  EXPECT_FALSE(is_reusable(r, edited));
  SampleContext moved = context(1, 1, 0);
  moved.settings = "device=cuda:0";
  EXPECT_FALSE(is_reusable(r, moved));
  EXPECT_FALSE(is_reusable(unjudged_record(context(1, 1, 0), "missing", "x"), context(1, 1, 0)));
}

}  // namespace
}  // namespace kforge::bench::kernelbench
