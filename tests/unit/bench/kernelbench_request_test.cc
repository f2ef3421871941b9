#include "kforge/bench/kernelbench_request.h"

#include <gtest/gtest.h>

#include <functional>

namespace kforge::bench::kernelbench {
namespace {

constexpr const char* kProblem =
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n";
constexpr const char* kSample =
    "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
    "        return x.clone()\n";

Json body() {
  return Json{{"problems",
               {{{"level", 1},
                 {"problem_id", 19},
                 {"name", "19_ReLU.py"},
                 {"ref_code", kProblem},
                 {"samples",
                  {{{"sample_id", 0}, {"source_code", kSample}},
                   {{"sample_id", 3}, {"source_code", kSample}}}}}}},
              {"fast_p", {1.5}},
              {"device", "cpu"}};
}

TEST(KernelbenchRequestTest, EachProblemIsABatchWithKernelBenchsDefaults) {
  auto r = parse_kernelbench_request(body(), model::RequestLimits{});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->problems.size(), 1u);
  const ProblemRequest& p = r->problems[0];
  ASSERT_EQ(p.samples.size(), 2u);
  EXPECT_EQ(p.samples[1].key.sample, 3);
  EXPECT_EQ(p.samples[1].file, "level_1_problem_19_sample_3_kernel.py");
  EXPECT_EQ(p.samples[0].problem, "19_ReLU.py");
  EXPECT_EQ(p.samples[0].source_sha256.size(), 64u);
  ASSERT_EQ(p.batch.jobs.size(), 2u);
  const model::JobRequest& job = p.batch.jobs[0];
  EXPECT_EQ(job.timing.max_trials, 100);
  EXPECT_EQ(job.num_correct_trials, 5);
  ASSERT_TRUE(job.atol.has_value() && job.rtol.has_value());
  EXPECT_DOUBLE_EQ(*job.atol, 1e-4);  // KernelBench's fp32 tolerance
  EXPECT_EQ(job.device, "cpu");
  EXPECT_EQ(p.batch.jobs[1].kernel.kernel_type, p.batch.jobs[0].kernel.kernel_type);
  EXPECT_EQ(r->fast_p, (std::vector<double>{0.0, 1.0, 1.5, 2.0}));
}

TEST(KernelbenchRequestTest, ErrorsNameTheFieldAsSent) {
  struct Case {
    std::function<void(Json&)> change;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](Json& b) { b.erase("problems"); }, "problems"},
      {[](Json& b) { b["problems"] = Json::array(); }, "problems"},
      {[](Json& b) { b["problems"][0].erase("ref_code"); }, "problems[0].ref_code"},
      {[](Json& b) { b["problems"][0]["level"] = "one"; }, "problems[0].level"},
      {[](Json& b) { b["problems"][0]["samples"] = Json::array(); }, "problems[0].samples"},
      {[](Json& b) { b["problems"][0]["samples"][1].erase("source_code"); },
       "problems[0].samples[1].source_code"},
      {[](Json& b) { b["problems"][0]["samples"][1]["source_code"] = ""; },
       "problems[0].samples[1].source_code"},
      {[](Json& b) { b["problems"][0]["samples"][1]["sample_id"] = 0; },
       "problems[0].samples[1].sample_id"},
      {[](Json& b) { b["problems"].push_back(b["problems"][0]); }, "problems[1].problem_id"},
      {[](Json& b) { b["fast_p"] = Json::array({-1}); }, "fast_p[0]"},
      {[](Json& b) { b["kernel_type"] = 3; }, "kernel_type"},
      {[](Json& b) { b["num_trials"] = 0; }, "num_trials"},
  };
  for (const Case& c : cases) {
    Json b = body();
    c.change(b);
    auto r = parse_kernelbench_request(b, model::RequestLimits{});
    ASSERT_FALSE(r.is_ok()) << c.field;
    EXPECT_EQ(r.status().field_path(), c.field) << r.status().to_string();
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << c.field;
  }
}

TEST(KernelbenchRequestTest, TheAnswerSortsTheSamplesAndSummarizes) {
  SampleContext a{{1, 2, 0}, "a", "", "", "", ""};
  SampleContext b{{1, 1, 1}, "b", "", "", "", ""};
  Json answer = kernelbench_answer(
      {"batch-1"}, {unjudged_record(a, "missing", "x"), unjudged_record(b, "missing", "y")},
      {0.0, 1.0, 2.0});
  ASSERT_EQ(answer["samples"].size(), 2u);
  EXPECT_EQ(answer["samples"][0]["problem_id"], 1);
  EXPECT_EQ(answer["summary"]["all"]["samples"], 2);
  EXPECT_EQ(answer["batches"][0], "batch-1");
}

}  // namespace
}  // namespace kforge::bench::kernelbench
