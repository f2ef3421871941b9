#include "kforge/bench/bench_plan.h"

#include <gtest/gtest.h>

#include <fstream>

#include "bench/bench_test_support.h"
#include "kforge/common/files.h"

namespace kforge::bench {
namespace {

using testing::health_with;
using testing::kernel_library;

BenchOptions options_for(std::vector<std::string> ops) {
  BenchOptions o;
  o.ops = std::move(ops);
  o.library = kernel_library();
  return o;
}

int count(const BenchPlan& plan, JobRole role) {
  return static_cast<int>(std::count_if(plan.jobs.begin(), plan.jobs.end(),
                                        [role](const PlannedJob& j) { return j.role == role; }));
}

TEST(BenchPlanTest, EveryVersionAtEverySizeThenTheBaselinesAndThePeaksFirst) {
  auto plan = plan_bench(options_for({"add", "mha"}), health_with({"cpu", "cuda:0"}));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(plan->device, "cuda:0");  // the first GPU by default
  EXPECT_FALSE(plan->interpreter);
  ASSERT_EQ(plan->ops.size(), 2u);
  EXPECT_EQ(plan->ops[0].dtype, "float32");
  EXPECT_EQ(plan->ops[1].dtype, "float16");  // mha's default
  EXPECT_EQ(plan->ops[0].kernels_origin, "library");
  // add is memory-bound (copy probe), mha compute-bound (float16 matmul probe).
  ASSERT_GE(plan->jobs.size(), 2u);
  EXPECT_EQ(plan->jobs[0].role, JobRole::kCopyPeak);
  EXPECT_EQ(plan->jobs[1].role, JobRole::kMatmulPeak);
  EXPECT_EQ(plan->jobs[1].dtype, "float16");
  EXPECT_EQ(count(*plan, JobRole::kVersion), 2 * 4 * 3);
  EXPECT_EQ(count(*plan, JobRole::kTorch), 2 * 3);
  EXPECT_EQ(count(*plan, JobRole::kTorchCompile), 2 * 3);
  EXPECT_EQ(plan->jobs[2].label, "add v1_baseline small");
  for (const auto& job : plan->jobs)
    EXPECT_EQ(job.request.device, "cuda:0");
}

TEST(BenchPlanTest, TheCpuDeviceUsesTheInterpreterSizesAndNoPeaksWithoutLarge) {
  BenchOptions o = options_for({"softmax"});
  o.sizes = {"small"};
  o.device = "cpu";
  auto plan = plan_bench(o, health_with({"cpu", "cuda:0"}));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->interpreter);
  EXPECT_EQ(plan->jobs.size(), 4u + 1 + 1);  // four versions, torch, torch.compile
  EXPECT_EQ(plan->jobs[0].request.kernel.io->args[0].tensor_spec->shape,
            (std::vector<int64_t>{16, 64}));
  EXPECT_NE(plan->jobs[0].request.kernel.source_code.find("_kforge_index_fix"), std::string::npos)
      << "the cpu jobs carry kernels/interpreter_compat.py";
}

TEST(BenchPlanTest, TheSeedPresetRunsTheSeedSizesOnTheCpuDevice) {
  BenchOptions o = options_for({"add", "mha"});
  o.sizes = {"small", "large"};
  o.device = "cpu";
  o.size_preset = "seed";
  auto plan = plan_bench(o, health_with({"cpu"}));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->interpreter);  // still Triton's interpreter, with its fix
  EXPECT_EQ(plan->profile, "gpu");
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& job : plan->jobs) {
    if (job.role != JobRole::kVersion || job.version != "v1_baseline") continue;
    shapes.push_back(job.request.kernel.io->args[0].tensor_spec->shape);
    EXPECT_NE(job.request.kernel.source_code.find("_kforge_index_fix"), std::string::npos);
  }
  EXPECT_EQ(shapes, (std::vector<std::vector<int64_t>>{
                        {256, 256}, {4096, 4096}, {2, 8, 256, 64}, {4, 16, 4096, 64}}));
  // The default preset keeps the interpreter-sized shapes.
  o.size_preset = "default";
  plan = plan_bench(o, health_with({"cpu"}));
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(plan->profile, "cpu");
  auto first = std::find_if(plan->jobs.begin(), plan->jobs.end(),
                            [](const PlannedJob& j) { return j.role == JobRole::kVersion; });
  ASSERT_NE(first, plan->jobs.end());
  EXPECT_EQ(first->request.kernel.io->args[0].tensor_spec->shape, (std::vector<int64_t>{16, 64}));
}

TEST(BenchPlanTest, BadOptionsNameTheirField) {
  struct Case {
    std::function<void(BenchOptions&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](BenchOptions& o) { o.ops = {}; }, "ops"},
      {[](BenchOptions& o) {
         o.ops = {"softmax", "../x"};
       },
       "ops[1]"},
      {[](BenchOptions& o) {
         o.ops = {"softmax", "softmax"};
       },
       "ops[1]"},
      {[](BenchOptions& o) { o.ops = {"conv2d"}; }, "ops"},
      {[](BenchOptions& o) {
         o.sizes = {"small", "huge"};
       },
       "sizes[1]"},
      {[](BenchOptions& o) { o.runs = 0; }, "runs"},
      {[](BenchOptions& o) { o.size_preset = "huge"; }, "size_preset"},
      {[](BenchOptions& o) { o.dtype = "float64"; }, "dtype"},
      {[](BenchOptions& o) { o.device = "cuda:7"; }, "device"},
      {[](BenchOptions& o) { o.inline_kernels["gelu"]["v1_baseline"] = "x"; }, "kernels.gelu"},
      {[](BenchOptions& o) { o.inline_kernels["softmax"]["v5"] = "x"; }, "kernels.softmax.v5"},
      {[](BenchOptions& o) { o.kernels_dir = "/nonexistent-kforge-dir"; }, "kernels_dir"},
  };
  for (const auto& c : cases) {
    BenchOptions o = options_for({"softmax"});
    c.edit(o);
    auto plan = plan_bench(o, health_with({"cpu", "cuda:0"}));
    ASSERT_FALSE(plan.is_ok()) << c.field;
    EXPECT_EQ(plan.status().field_path(), c.field) << plan.status().to_string();
  }
  BenchOptions o = options_for({"conv2d"});
  auto plan = plan_bench(o, health_with({"cpu"}));
  EXPECT_NE(plan.status().message().find("has: add, gelu, layer_norm, mha, softmax"),
            std::string::npos);
}

TEST(BenchPlanTest, InlineSourcesReplaceTheLibraryAndMissingOnesAreReported) {
  BenchOptions o = options_for({"softmax"});
  o.sizes = {"small"};
  o.inline_kernels["softmax"]["v2_tiling"] = "\"\"\"v2_tiling — mine.\"\"\"\n";
  o.retries["softmax"]["v2_tiling"] = 2;
  auto plan = plan_bench(o, health_with({"cpu"}));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const OpPlan& op = plan->ops[0];
  EXPECT_EQ(op.kernels_origin, "inline");
  EXPECT_EQ(op.versions[0].load_error, "not provided");
  EXPECT_EQ(op.versions[1].summary_en, "mine");
  EXPECT_EQ(op.retries.at("v2_tiling"), 2);
  EXPECT_EQ(count(*plan, JobRole::kVersion), 1);
}

TEST(BenchPlanTest, AKernelsDirectoryGivesVersionsAndRetries) {
  const auto dir = std::filesystem::temp_directory_path() / "kforge-bench-dir";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "softmax");
  std::ofstream(dir / "softmax" / "v4_optimized.py") << "\"\"\"v4_optimized — agent's.\"\"\"\n";
  std::ofstream(dir / "softmax" / "retries.json") << R"({"v4_optimized": 3})";
  BenchOptions o = options_for({"softmax"});
  o.kernels_dir = dir;
  o.sizes = {"small"};
  auto plan = plan_bench(o, health_with({"cpu"}));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(plan->ops[0].kernels_origin, dir.string());
  EXPECT_EQ(plan->ops[0].retries.at("v4_optimized"), 3);
  EXPECT_EQ(plan->ops[0].manifest.op, "softmax");  // the library's manifest
  EXPECT_EQ(count(*plan, JobRole::kVersion), 1);

  std::ofstream(dir / "softmax" / "retries.json") << R"({"v9": 1})";
  EXPECT_FALSE(plan_bench(o, health_with({"cpu"})).is_ok());
  std::filesystem::remove_all(dir);
}

TEST(BenchPlanTest, AKernelsDirectoryGetsTheScaffoldsTestsAndKeepsItsOwn) {
  const auto dir = std::filesystem::temp_directory_path() / "kforge-bench-tests-dir";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "softmax" / "tests");
  std::ofstream(dir / "softmax" / "tests" / "test_benchmark.py") << "# mine\n";
  BenchOptions o = options_for({"softmax"});
  o.kernels_dir = dir;
  auto plan = plan_bench(o, health_with({"cpu"}));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const OpTests& tests = plan->ops[0].tests;
  EXPECT_EQ(tests.dir, std::filesystem::absolute(dir / "softmax" / "tests"));
  EXPECT_EQ(tests.files, (std::map<std::string, std::string>{{"conftest.py", "written"},
                                                             {"test_benchmark.py", "kept"},
                                                             {"test_correctness.py", "written"}}));
  EXPECT_TRUE(tests.note.empty()) << tests.note;
  EXPECT_EQ(*read_file(dir / "softmax" / "tests" / "test_benchmark.py"), "# mine\n");
  EXPECT_EQ(*read_file(dir / "softmax" / "tests" / "test_correctness.py"),
            *read_file(kernel_library() / "_scaffold" / "tests" / "test_correctness.py"));
  // No manifest.json of its own: the tests read a copy of the one the bench used.
  EXPECT_EQ(*read_file(dir / "softmax" / "tests" / "manifest.json"),
            *read_file(kernel_library() / "softmax" / "manifest.json"));
  plan = plan_bench(o, health_with({"cpu"}));
  ASSERT_TRUE(plan.is_ok());
  for (const auto& [name, state] : plan->ops[0].tests.files)
    EXPECT_EQ(state, "kept") << name;
  std::filesystem::remove_all(dir);

  // The library's own ops have theirs; nothing is written there.
  plan = plan_bench(options_for({"add"}), health_with({"cpu"}));
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(plan->ops[0].tests.dir, kernel_library() / "add" / "tests");
  EXPECT_EQ(plan->ops[0].tests.files.size(), 3u);
  for (const auto& [name, state] : plan->ops[0].tests.files)
    EXPECT_EQ(state, "kept") << name;
}

}  // namespace
}  // namespace kforge::bench
