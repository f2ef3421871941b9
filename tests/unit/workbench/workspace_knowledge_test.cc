#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kforge/common/files.h"
#include "kforge/workbench/job_builder.h"
#include "kforge/workbench/knowledge.h"
#include "kforge/workbench/names.h"
#include "kforge/workbench/workspace.h"

namespace kforge::workbench {
namespace {

namespace fs = std::filesystem;

class WorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = fs::temp_directory_path() / ("kforge-ws-" + new_session_id()); }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(WorkspaceTest, CreatesTheLayoutAndNeverOverwritesAVersion) {
  const std::string id = new_session_id();
  auto ws = Workspace::create(root_, id);
  ASSERT_TRUE(ws.is_ok()) << ws.status().to_string();
  for (const char* sub : {"kernel", "tests", "log", "docs"}) {
    EXPECT_TRUE(fs::is_directory(root_ / id / sub)) << sub;
  }
  auto v1 = ws->write_version("softmax", 1, "print(1)\n");
  ASSERT_TRUE(v1.is_ok());
  EXPECT_EQ(*v1, "kernel/softmax_v1.py");
  EXPECT_EQ(read_file(root_ / id / *v1).value(), "print(1)\n");
  auto again = ws->write_version("softmax", 1, "print(2)\n");
  ASSERT_FALSE(again.is_ok());
  EXPECT_EQ(again.status().code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(read_file(root_ / id / *v1).value(), "print(1)\n");
  EXPECT_EQ(Workspace::create(root_, id).status().code(), ErrorCode::kAlreadyExists);
}

TEST_F(WorkspaceTest, RefusesEscapingNamesAndPlantedSymlinks) {
  const std::string id = new_session_id();
  auto ws = Workspace::create(root_, id);
  ASSERT_TRUE(ws.is_ok());
  EXPECT_FALSE(ws->write_version("../x", 1, "").is_ok());
  EXPECT_FALSE(ws->write_test("../../x.py", "").is_ok());
  EXPECT_FALSE(ws->write_dev_log("a/b", "").is_ok());
  EXPECT_FALSE(Workspace::create(root_, "../../tmp").is_ok());
  // A symlink where the next version goes is not written through.
  const fs::path outside = root_ / "outside.txt";
  std::ofstream(outside) << "keep";
  fs::create_symlink(outside, root_ / id / "kernel" / "softmax_v2.py");
  EXPECT_FALSE(ws->write_version("softmax", 2, "evil").is_ok());
  EXPECT_EQ(read_file(outside).value(), "keep");
  // A symlinked subdirectory is refused when the workspace is opened.
  fs::remove_all(root_ / id / "log");
  fs::create_directory_symlink(root_, root_ / id / "log");
  EXPECT_FALSE(Workspace::open(root_ / id).is_ok());
}

TEST_F(WorkspaceTest, AppendsLogLines) {
  const std::string id = new_session_id();
  auto ws = Workspace::create(root_, id);
  ASSERT_TRUE(ws.is_ok());
  ASSERT_TRUE(ws->append_log(id, Json{{"tool", "a"}}).is_ok());
  ASSERT_TRUE(ws->append_log(id, Json{{"tool", "b"}}).is_ok());
  EXPECT_EQ(read_file(root_ / id / "log" / (id + ".jsonl")).value(),
            "{\"tool\":\"a\"}\n{\"tool\":\"b\"}\n");
}

TEST(Knowledge, LoadsTheTwelveOpsAndFiveTemplates) {
  auto k = Knowledge::load();
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();
  for (const char* op : {"vector_add", "vector_mul", "relu", "gelu", "softmax", "layer_norm",
                         "matmul", "dropout", "attention", "cross_entropy", "sum", "mean"}) {
    EXPECT_NE((*k)->op(op), nullptr) << op;
  }
  EXPECT_EQ((*k)->op_name("Add"), "vector_add");
  EXPECT_EQ((*k)->op_name("LayerNorm"), "layer_norm");
  EXPECT_EQ((*k)->op("nope"), nullptr);
  for (const char* p : {"elementwise", "reduction", "matmul", "fused", "attention"}) {
    const KernelTemplate* t = (*k)->find_template(p);
    ASSERT_NE(t, nullptr) << p;
    EXPECT_NE(t->source.find("@triton.jit"), std::string::npos) << p;
    EXPECT_NE(t->source.find("solve"), std::string::npos) << p;
  }
  EXPECT_NE((*k)->find_template("elementwise")->source.find("solve = triton_add"),
            std::string::npos);
  EXPECT_FALSE((*k)->overview().empty());
  EXPECT_FALSE((*k)->triton_syntax().empty());
  EXPECT_TRUE((*k)->file("knowledge/torch_ops.json").has_value());
}

TEST(JobBuilder, OneCompareJobPerSizeWithTheKernelFirst) {
  ExecutionSpec spec;
  spec.purpose = Purpose::kBenchmark;
  spec.kernel_source = "import torch\ndef solve(x):\n    return x\n";
  spec.test_input_code = "sizes = [8, 16]\ndef make_inputs(n):\n    return [torch.ones(n)]\n";
  spec.reference_code = "def reference(x):\n    return x\n";
  spec.device = "cpu";
  spec.interpreter_compat = "# compat\n";
  spec.rep = 1;
  auto jobs = plan_jobs(spec);
  ASSERT_TRUE(jobs.is_ok()) << jobs.status().to_string();
  ASSERT_EQ(jobs->size(), 2u);
  const model::JobRequest& r = (*jobs)[1].request;
  EXPECT_EQ(r.kind, model::JobKind::kCompare);
  EXPECT_EQ(r.kernel.kernel_type, model::KernelType::kTorch);
  EXPECT_TRUE(r.kernel.source_code.starts_with(spec.kernel_source));  // line numbers kept
  EXPECT_NE(r.kernel.source_code.find("# compat"), std::string::npos);
  EXPECT_NE(r.kernel.source_code.find("_KF_CASE = 1"), std::string::npos);
  EXPECT_NE(r.kernel.source_code.find("class ModelNew"), std::string::npos);
  ASSERT_TRUE(r.reference.has_value());
  EXPECT_TRUE(r.reference->source_code.starts_with(*spec.reference_code));
  EXPECT_NE(r.reference->source_code.find("class Model("), std::string::npos);
  EXPECT_TRUE(r.measure_performance);
  EXPECT_EQ(r.timing.max_trials, 1);
  EXPECT_EQ(r.timing.min_trials, 1);
  EXPECT_EQ(r.device, "cpu");
  EXPECT_EQ((*jobs)[0].input_case.label, "8");
}

TEST(JobBuilder, RunIsAnEvaluateWithoutTimingAndValidateNeedsAReference) {
  ExecutionSpec spec;
  spec.kernel_source = "def solve(x):\n    return x\n";
  spec.test_input_code = "args = [torch.ones(3)]\n";
  spec.reference_code = "def reference(x):\n    return x\n";
  spec.device = "cuda:0";
  spec.interpreter_compat = "# compat\n";
  auto run = plan_jobs(spec);
  ASSERT_TRUE(run.is_ok());
  EXPECT_EQ((*run)[0].request.kind, model::JobKind::kEvaluate);
  EXPECT_FALSE((*run)[0].request.measure_performance);
  EXPECT_EQ((*run)[0].request.kernel.source_code.find("# compat"), std::string::npos);
  spec.purpose = Purpose::kValidate;
  spec.reference_code.reset();
  auto validate = plan_jobs(spec);
  ASSERT_FALSE(validate.is_ok());
  EXPECT_EQ(validate.status().field_path(), "reference_code");
  spec.reference_code = "def reference(x):\n    return x\n";
  spec.entry = "solve; import os";
  EXPECT_EQ(plan_jobs(spec).status().field_path(), "entry_function");
}

TEST(JobBuilder, TheTestInputCodeIsEmbeddedAsAStringLiteral) {
  const std::string tricky = "s = \"\"\"\n'''\\\"\nargs = [1]  # é\n";
  const std::string harness = candidate_harness("solve", tricky, -1);
  EXPECT_NE(harness.find("_KF_TEST_INPUT_CODE = \"s = \\\"\\\"\\\"\\n'''\\\\\\\"\\nargs"),
            std::string::npos)
      << harness;
}

}  // namespace
}  // namespace kforge::workbench
