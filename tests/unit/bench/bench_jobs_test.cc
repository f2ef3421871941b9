#include "kforge/bench/bench_jobs.h"

#include <gtest/gtest.h>

#include "bench/bench_test_support.h"
#include "kforge/model/serialize.h"

namespace kforge::bench {
namespace {

using testing::kernel_library;

class BenchJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = load_manifest(kernel_library() / "softmax");
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    manifest_ = *m;
    version_ = load_versions(kernel_library() / "softmax")[1];
    settings_.device = "cpu";
    settings_.interpreter = true;
    settings_.runs = 7;
    settings_.correct_trials = 3;
    settings_.timeout_s = 90;
    settings_.interpreter_compat = "# the interpreter fix\n";
  }
  const SizeSpec& cpu_small() const { return manifest_.sizes.at("cpu").at("small"); }

  OpManifest manifest_;
  KernelVersion version_;
  JobSettings settings_;
};

TEST_F(BenchJobsTest, AVersionIsAMultiKernelComparedWithTheTorchReference) {
  auto r = version_request(manifest_, cpu_small(), "float32", version_, settings_);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->kind, model::JobKind::kCompare);
  EXPECT_EQ(r->device, "cpu");
  EXPECT_EQ(r->num_correct_trials, 3);
  EXPECT_DOUBLE_EQ(r->timeout_s, 90);
  EXPECT_EQ(r->timing.min_trials, 7);  // exactly `runs` timed runs
  EXPECT_EQ(r->timing.max_trials, 7);
  EXPECT_DOUBLE_EQ(*r->atol, 1e-5);
  EXPECT_DOUBLE_EQ(*r->rtol, 1e-5);

  const model::KernelCode& cand = r->kernel;
  EXPECT_EQ(cand.kernel_type, model::KernelType::kMultiKernel);
  EXPECT_EQ(cand.entry_point(), "kforge_entry");
  EXPECT_EQ(cand.metadata["kernel_name"], "softmax_v2_tiling");
  ASSERT_TRUE(cand.io.has_value());
  const Json io = model::to_json(*cand.io);
  EXPECT_EQ(io["args"][0]["name"], "x");
  EXPECT_EQ(io["args"][0]["tensor_spec"]["shape"], Json({16, 64}));
  EXPECT_EQ(io["args"][0]["tensor_spec"]["dtype"], "float32");
  EXPECT_EQ(io["args"][0]["tensor_spec"]["init"]["kind"], "randn");
  EXPECT_EQ(io["args"][1]["name"], "dim");
  EXPECT_EQ(io["args"][1]["value"], -1);
  // The version file bundled whole, then the interpreter fix, then the entry point.
  const std::string& src = cand.source_code;
  EXPECT_TRUE(src.starts_with(version_.source));
  const size_t fix = src.find("# the interpreter fix");
  const size_t entry =
      src.find("def kforge_entry(x, dim):\n    return triton_softmax(x, dim=dim)\n");
  ASSERT_NE(fix, std::string::npos);
  ASSERT_NE(entry, std::string::npos);
  EXPECT_LT(fix, entry);

  ASSERT_TRUE(r->reference.has_value());
  EXPECT_EQ(r->reference->kernel_type, model::KernelType::kTorch);
  EXPECT_FALSE(r->reference->io.has_value());
  EXPECT_NE(r->reference->source_code.find("def reference(x):\n    dim = -1\n    return "
                                           "torch.softmax(x, dim=dim)\n"),
            std::string::npos);
  EXPECT_EQ(r->reference->source_code.find("ModelNew"), std::string::npos);
}

TEST_F(BenchJobsTest, OnAGpuTheCandidateHasNoInterpreterFixAndTheRealSizes) {
  settings_.device = "cuda:0";
  settings_.interpreter = false;
  auto r = version_request(manifest_, manifest_.sizes.at("gpu").at("large"), "float16", version_,
                           settings_);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->kernel.source_code.find("interpreter fix"), std::string::npos);
  EXPECT_EQ(model::to_json(*r->kernel.io)["args"][0]["tensor_spec"]["shape"], Json({4096, 4096}));
  EXPECT_DOUBLE_EQ(*r->atol, 1e-2);  // the manifest's float16 tolerance
}

TEST_F(BenchJobsTest, TorchAndTorchCompileBaselines) {
  auto eager = eager_request(manifest_, cpu_small(), "float32", settings_);
  ASSERT_TRUE(eager.is_ok()) << eager.status().to_string();
  EXPECT_EQ(eager->kind, model::JobKind::kEvaluate);
  EXPECT_EQ(eager->kernel.kernel_type, model::KernelType::kTorch);
  ASSERT_TRUE(eager->kernel.io.has_value());
  EXPECT_EQ(eager->kernel.io->args.size(), 1u);  // tensors only: dim is a constant of the source
  EXPECT_EQ(eager->kernel.source_code.find("ModelNew"), std::string::npos);

  auto compiled = compile_request(manifest_, cpu_small(), "float32", settings_);
  ASSERT_TRUE(compiled.is_ok()) << compiled.status().to_string();
  EXPECT_EQ(compiled->kind, model::JobKind::kCompare);
  EXPECT_NE(compiled->kernel.source_code.find("self.compiled = torch.compile(reference)"),
            std::string::npos);
  // Inductor's cache needs a user name, which a jailed uid without a passwd entry lacks.
  EXPECT_NE(compiled->kernel.source_code.find(
                "        _inductor_env()\n        self.compiled = torch.compile(reference)"),
            std::string::npos);
  EXPECT_EQ(compiled->kernel.source_code, compiled->reference->source_code);
}

TEST_F(BenchJobsTest, ScalarsBecomePythonLiterals) {
  EXPECT_EQ(python_literal(Json(true)), "True");
  EXPECT_EQ(python_literal(Json(false)), "False");
  EXPECT_EQ(python_literal(Json()), "None");
  EXPECT_EQ(python_literal(Json(1e-05)), "1e-05");
  EXPECT_EQ(python_literal(Json("tanh")), "\"tanh\"");
  EXPECT_EQ(python_literal(Json("a\"b")), "\"a\\\"b\"");
  auto mha = load_manifest(kernel_library() / "mha");
  ASSERT_TRUE(mha.is_ok());
  EXPECT_NE(torch_reference_source(*mha, false).find("    is_causal = False\n"), std::string::npos);
}

TEST_F(BenchJobsTest, PeakProbesMoveAndComputeWhatTheyClaim) {
  auto copy = copy_peak_job(settings_);
  ASSERT_TRUE(copy.is_ok()) << copy.status().to_string();
  EXPECT_EQ(copy->bytes, int64_t{2} * (16 << 20) * 4);
  EXPECT_EQ(model::to_json(*copy->request.kernel.io)["args"][0]["tensor_spec"]["shape"],
            Json::array({16 << 20}));
  auto matmul = matmul_peak_job("float16", settings_);
  ASSERT_TRUE(matmul.is_ok()) << matmul.status().to_string();
  EXPECT_EQ(matmul->flops, int64_t{2} * 512 * 512 * 512);
  EXPECT_NE(matmul->request.kernel.source_code.find("torch.matmul(a, b)"), std::string::npos);
  settings_.interpreter = false;
  EXPECT_EQ(matmul_peak_job("float16", settings_)->flops, int64_t{2} * 8192 * 8192 * 8192);
}

}  // namespace
}  // namespace kforge::bench
