// The request forms of the kernel evaluation server (docs/compatibility.md §1) kforge accepts.
#include <gtest/gtest.h>

#include "kforge/model/parse.h"
#include "kforge/model/serialize.h"

namespace kforge::model {
namespace {

const RequestLimits kLimits;

Json cuda_kernel(std::string source, Json metadata = Json::object()) {
  return Json{{"source_code", std::move(source)},
              {"kernel_type", "cuda"},
              {"metadata", std::move(metadata)},
              {"io", Json::parse(R"({"args": [
                 {"name": "x", "type": "tensor", "tensor_spec": {"shape": [256]}},
                 {"name": "out", "type": "tensor", "role": "output", "tensor_spec": {"shape": [256]}},
                 {"name": "n", "type": "int", "value": 256}],
                 "launch": {"grid": {"x": 1}, "block": {"x": 256}}})")}};
}

Json torch_kernel(Json metadata = Json::object(), std::string type = "torch") {
  return Json{{"source_code", "def f(x): return x"},
              {"kernel_type", std::move(type)},
              {"metadata", std::move(metadata)}};
}

constexpr const char* kOneKernel =
    "__global__ void twice(const float* x, float* out, int n) {\n"
    "  int i = threadIdx.x; if (i < n) out[i] = 2 * x[i];\n}\n";

TEST(ParseCompatTest, LegacyBodyIsATorchReferenceAndATorchCudaCandidate) {
  Json body = {{"ref_code", "class Model: pass"}, {"custom_code", "class ModelNew: pass"}};
  auto req = parse_compare_request(body, kLimits);
  ASSERT_TRUE(req.is_ok()) << req.status().to_string();
  EXPECT_EQ(req->reference->kernel_type, KernelType::kTorch);
  EXPECT_EQ(req->reference->source_code, "class Model: pass");
  EXPECT_EQ(req->kernel.kernel_type, KernelType::kTorchCuda);
  EXPECT_EQ(req->kernel.source_code, "class ModelNew: pass");
  EXPECT_DOUBLE_EQ(req->timeout_s, 30.0);  // the old server's default for this body
  EXPECT_EQ(req->timing.max_trials, 100);
  body["num_trials"] = 7;
  body["timeout"] = 60;
  req = parse_compare_request(body, kLimits);
  ASSERT_TRUE(req.is_ok());
  EXPECT_EQ(req->timing.max_trials, 7);
  EXPECT_DOUBLE_EQ(req->timeout_s, 60.0);
}

TEST(ParseCompatTest, LegacyBodyErrorsNameTheLegacyFields) {
  auto half = parse_compare_request(Json{{"ref_code", "x"}}, kLimits);
  EXPECT_EQ(half.status().field_path(), "custom_code");
  auto blank = parse_compare_request(Json{{"ref_code", "  "}, {"custom_code", "x"}}, kLimits);
  EXPECT_EQ(blank.status().field_path(), "ref_code");
  auto wrong = parse_compare_request(Json{{"ref_code", 3}, {"custom_code", "x"}}, kLimits);
  EXPECT_EQ(wrong.status().field_path(), "ref_code");
}

TEST(ParseCompatTest, CudaKernelWithoutANameUsesItsOnlyGlobalFunction) {
  auto kernel = parse_kernel_code(cuda_kernel(kOneKernel), JsonPath("kernel"), kLimits);
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();
  EXPECT_EQ(kernel->entry_point(), "twice");
  EXPECT_EQ(kernel->metadata["kernel_name"], "twice");  // stored, so a restart reads it back
  std::string two = std::string(kOneKernel) + "__global__ void other(float* x) {}\n";
  auto ambiguous = parse_kernel_code(cuda_kernel(two), JsonPath("kernel"), kLimits);
  EXPECT_EQ(ambiguous.status().field_path(), "kernel.metadata.kernel_name");
  EXPECT_NE(ambiguous.status().message().find("several __global__ functions (twice, other)"),
            std::string::npos);
  auto named =
      parse_kernel_code(cuda_kernel(two, {{"kernel_name", "other"}}), JsonPath("k"), kLimits);
  ASSERT_TRUE(named.is_ok());
  EXPECT_EQ(named->entry_point(), "other");
}

TEST(ParseCompatTest, CudaKernelNamesMayBeQualified) {
  std::string source = "namespace ops { template <int B> __global__ void k(float* x) {} }";
  auto k = parse_kernel_code(cuda_kernel(source, {{"kernel_name", "ops::k<128>"}}),
                             JsonPath("kernel"), kLimits);
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();
  auto bad = parse_kernel_code(cuda_kernel(source, {{"kernel_name", "k; rm -rf /"}}),
                               JsonPath("kernel"), kLimits);
  EXPECT_EQ(bad.status().field_path(), "kernel.metadata.kernel_name");
  auto py = parse_kernel_code(
      Json{
          {"source_code", "x"}, {"kernel_type", "triton"}, {"metadata", {{"kernel_name", "a::b"}}}},
      JsonPath("kernel"), kLimits);
  EXPECT_EQ(py.status().field_path(), "kernel.metadata.kernel_name");
}

TEST(ParseCompatTest, CompilerOptionsIsTheOldSpellingOfCompileOptions) {
  auto k = parse_kernel_code(cuda_kernel(kOneKernel, {{"compiler_options", {"--use_fast_math"}}}),
                             JsonPath("kernel"), kLimits);
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();
  EXPECT_EQ(k->metadata["compile_options"], Json::array({"--use_fast_math"}));
  EXPECT_FALSE(k->metadata.contains("compiler_options"));
  // An option outside the allow-list is refused whatever its spelling.
  Json body = {{"kernel", cuda_kernel(kOneKernel, {{"compiler_options", {"-I/etc"}}})}};
  auto refused = parse_evaluate_request(body, kLimits);
  EXPECT_EQ(refused.status().field_path(), "kernel.metadata.compile_options[0]");
  auto both = parse_kernel_code(
      cuda_kernel(kOneKernel, {{"compiler_options", {"-O3"}}, {"compile_options", {"-O2"}}}),
      JsonPath("kernel"), kLimits);
  EXPECT_EQ(both.status().field_path(), "kernel.metadata.compiler_options");
}

TEST(ParseCompatTest, TorchTargetNamesAreChecked) {
  EXPECT_TRUE(
      parse_kernel_code(torch_kernel({{"function_name", "f"}}), JsonPath("k"), kLimits).is_ok());
  EXPECT_TRUE(
      parse_kernel_code(torch_kernel({{"class_name", "M"}, {"method_name", "run"}}, "torch_cuda"),
                        JsonPath("k"), kLimits)
          .is_ok());
  auto not_ident =
      parse_kernel_code(torch_kernel({{"function_name", "f()"}}), JsonPath("k"), kLimits);
  EXPECT_EQ(not_ident.status().field_path(), "k.metadata.function_name");
  auto both = parse_kernel_code(torch_kernel({{"function_name", "f"}, {"class_name", "M"}}),
                                JsonPath("k"), kLimits);
  EXPECT_EQ(both.status().field_path(), "k.metadata.class_name");
  Json triton = {
      {"source_code", "x"}, {"kernel_type", "triton"}, {"metadata", {{"function_name", "f"}}}};
  auto wrong_type = parse_kernel_code(triton, JsonPath("k"), kLimits);
  EXPECT_EQ(wrong_type.status().field_path(), "k.metadata.function_name");
}

TEST(ParseCompatTest, TimeoutAndTrialsHaveTheOldServersRanges) {
  Json body = {{"kernel", torch_kernel()}};
  for (double ok : {5.0, 600.0}) {
    body["timeout"] = ok;
    EXPECT_TRUE(parse_evaluate_request(body, kLimits).is_ok()) << ok;
  }
  for (double bad : {4.9, 600.5}) {
    body["timeout"] = bad;
    EXPECT_EQ(parse_evaluate_request(body, kLimits).status().field_path(), "timeout") << bad;
  }
  body.erase("timeout");
  body["num_trials"] = 10000;
  EXPECT_TRUE(parse_evaluate_request(body, kLimits).is_ok());
  for (int bad : {0, 10001}) {
    body["num_trials"] = bad;
    EXPECT_EQ(parse_evaluate_request(body, kLimits).status().field_path(), "num_trials") << bad;
  }
}

TEST(ParseCompatTest, DeviceMetricsFlagIsParsedAndStored) {
  Json body = {{"kernel", torch_kernel()}, {"enable_device_metrics", true}};
  auto req = parse_evaluate_request(body, kLimits);
  ASSERT_TRUE(req.is_ok());
  EXPECT_EQ(req->enable_device_metrics, true);
  EXPECT_EQ(to_request_json(*req)["enable_device_metrics"], true);
  body["enable_device_metrics"] = "yes";
  EXPECT_EQ(parse_evaluate_request(body, kLimits).status().field_path(), "enable_device_metrics");
  body.erase("enable_device_metrics");
  EXPECT_FALSE(parse_evaluate_request(body, kLimits)->enable_device_metrics.has_value());
}

TEST(ParseCompatTest, NullMeansNotGiven) {
  Json body = {{"kernel", torch_kernel()},
               {"atol", nullptr},
               {"timeout", nullptr},
               {"num_trials", nullptr},
               {"reference_kernel", nullptr}};
  body["kernel"]["io"] = nullptr;
  body["kernel"]["metadata"] = nullptr;
  auto req = parse_evaluate_request(body, kLimits);
  ASSERT_TRUE(req.is_ok()) << req.status().to_string();
  EXPECT_FALSE(req->atol.has_value());
  EXPECT_EQ(req->kind, JobKind::kEvaluate);
}

}  // namespace
}  // namespace kforge::model
