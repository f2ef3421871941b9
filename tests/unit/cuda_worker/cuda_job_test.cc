// The native CUDA worker without a GPU (what runs on CI): it reads the canonical job spec
// as it is (model/job_spec.h; no renaming to the REST shape), refuses a job that is not all
// `cuda` or a spec that is not canonical with error_kind "worker", compiles with the real
// NVRTC (from the CUDA wheels), reports compile errors, and answers a job that must run a
// kernel with a runtime error that says there is no device. The result has the Python
// worker's shape (tests/protocol/results.json).
#include "kforge/cuda_worker/cuda_job.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "kforge/common/files.h"
#include "kforge/cuda_worker/job_spec.h"

namespace kforge::cuda_worker {
namespace {

namespace fs = std::filesystem;

Json vector_spec() {
  auto text = read_file(fs::path(KFORGE_TEST_SOURCE_DIR) / "tests" / "protocol" / "specs" /
                        "accepted_compare_cuda_inline_zlib.json");
  EXPECT_TRUE(text.is_ok());
  auto j = parse_json(text.is_ok() ? *text : "{}");
  EXPECT_TRUE(j.is_ok());
  return (*j)["spec"];
}

TEST(CudaDeviceNumberTest, OnlyCudaColonDigitsIsANumber) {
  EXPECT_EQ(cuda_device_number("cuda:0"), 0);
  EXPECT_EQ(cuda_device_number("cuda:13"), 13);
  EXPECT_EQ(cuda_device_number("cpu"), -1);
  EXPECT_EQ(cuda_device_number("cuda:"), -1);
  EXPECT_EQ(cuda_device_number("cuda:1x"), -1);
  EXPECT_EQ(cuda_device_number("cuda:-1"), -1);
  EXPECT_EQ(cuda_device_number("gpu:0"), -1);
}

TEST(NativeJobSpecTest, ReadsTheCanonicalSpecAsItIs) {
  const Json spec = vector_spec();
  auto job = parse_native_job(spec);
  ASSERT_TRUE(job.is_ok()) << job.status().to_string();
  EXPECT_EQ(job->job_id, "vec-1");
  EXPECT_EQ(job->device, "cuda:0");
  ASSERT_TRUE(job->request.reference.has_value());
  EXPECT_EQ(job->request.reference->entry_point(), "scale");
  EXPECT_EQ(job->device_metrics["sections"].size(), 2u);
  EXPECT_EQ(job->cache_dir, "/tmp/cache");
  // The inline data was decoded once, by the parser, and kept for the inputs.
  const auto& data = job->request.kernel.io->args[0].tensor_spec->data;
  ASSERT_TRUE(data.has_value());
  ASSERT_NE(data->bytes, nullptr);
  EXPECT_EQ(data->bytes->size(), 16u);
}

TEST(NativeJobSpecTest, RefusesAKernelThatIsNotCudaNamingWhichSide) {
  Json spec = vector_spec();
  spec["reference"]["kernel_type"] = "torch";
  spec["reference"].erase("io");
  spec["reference"]["metadata"] = Json::object();
  auto job = parse_native_job(spec);
  ASSERT_FALSE(job.is_ok());
  EXPECT_EQ(job.status().field_path(), "reference.kernel_type");
}

TEST(NativeJobSpecTest, TheRestShapeIsNotASpec) {
  // What the worker used to rebuild: {kernel, reference_kernel, ...} without the resolved
  // fields. The spec is the one shape; the REST body is not accepted in its place.
  Json body = vector_spec();
  body["reference_kernel"] = body["reference"];
  body.erase("reference");
  auto job = parse_native_job(body);
  ASSERT_FALSE(job.is_ok());
  EXPECT_EQ(job.status().field_path(), "reference");
}

class CudaJobOnCpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path wheel_lib = fs::path(KFORGE_TEST_CUDA_INCLUDE_DIR).parent_path() / "lib";
    if (fs::exists(wheel_lib / "libnvrtc.so.13")) {
      ::setenv("KFORGE_NVRTC_LIB", (wheel_lib / "libnvrtc.so.13").c_str(), 0);
    }
    cache_ = fs::temp_directory_path() / ("kforge-cuda-job-test-" + std::to_string(::getpid()));
    runtime_ = WorkerRuntime::start({.device = "cpu", .arch = "sm_90a", .why_no_gpu = "a test"});
    ASSERT_NE(runtime_->nvrtc(), nullptr)
        << "NVRTC must be available (scripts/setup.sh installs it): " << runtime_->nvrtc_error();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(cache_, ec);
  }

  Json cpu_spec() {
    Json spec = vector_spec();
    spec["device"] = "cpu";
    spec.erase("device_metrics");
    spec["cache_dir"] = cache_.string();
    spec["scratch_dir"] = (cache_ / "scratch").string();
    return spec;
  }

  fs::path cache_;
  std::unique_ptr<WorkerRuntime> runtime_;
};

TEST_F(CudaJobOnCpuTest, CompilesThenSaysThereIsNoDevice) {
  std::vector<std::string> phases;
  const JobResult result = run_cuda_job(
      cpu_spec(), *runtime_, [&phases](const std::string& phase, const std::string&, const Json&) {
        phases.push_back(phase);
      });
  const Json r = result.to_json();
  EXPECT_TRUE(r["compiled"].get<bool>()) << r.dump();
  EXPECT_EQ(r["error_kind"], "runtime");
  EXPECT_NE(r["runtime_error"].get<std::string>().find("no CUDA device"), std::string::npos)
      << r["runtime_error"];
  EXPECT_TRUE(r["phases_ms"].contains("compile")) << r["phases_ms"];
  EXPECT_EQ(r["metadata"]["worker_runtime"], "native");
  EXPECT_EQ(r["kernel_activity"]["measured"], false);
}

TEST_F(CudaJobOnCpuTest, ACompileErrorIsACompileResult) {
  Json spec = cpu_spec();
  spec["kernel"]["source_code"] =
      "extern \"C\" __global__ void scale(const float* x, float* out, float s, int n) {\n"
      "  out[0] = undefined_name;\n}\n";
  const Json r = run_cuda_job(spec, *runtime_, ProgressFn()).to_json();
  EXPECT_FALSE(r["compiled"].get<bool>());
  EXPECT_EQ(r["error_kind"], "compile");
  EXPECT_NE(r["compilation_error"].get<std::string>().find("undefined_name"), std::string::npos)
      << r["compilation_error"];
}

TEST_F(CudaJobOnCpuTest, ASpecThatIsNotCanonicalIsAWorkerErrorNamingTheField) {
  Json spec = cpu_spec();
  spec["timing"].erase("rse_target");
  const Json r = run_cuda_job(spec, *runtime_, ProgressFn()).to_json();
  EXPECT_EQ(r["error_kind"], "worker");
  EXPECT_NE(r["runtime_error"].get<std::string>().find("timing.rse_target"), std::string::npos)
      << r["runtime_error"];
}

TEST_F(CudaJobOnCpuTest, AJobForAnotherDeviceIsAWorkerError) {
  Json spec = cpu_spec();
  spec["device"] = "cuda:3";
  const Json r = run_cuda_job(spec, *runtime_, ProgressFn()).to_json();
  EXPECT_EQ(r["error_kind"], "worker");
  EXPECT_NE(r["runtime_error"].get<std::string>().find("worker runs on cpu"), std::string::npos)
      << r["runtime_error"];
}

}  // namespace
}  // namespace kforge::cuda_worker
