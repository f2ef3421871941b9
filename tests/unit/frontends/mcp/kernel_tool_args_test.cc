#include "kforge/frontends/mcp/kernel_tool_args.h"

#include <gtest/gtest.h>

namespace kforge::frontends::mcp {
namespace {

const char* kTorch =
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x): return x\n";

Json io_contract() {
  Json t = {{"shape", {16}}, {"dtype", "float32"}};
  return Json{
      {"args",
       Json::array(
           {{{"name", "x"}, {"type", "tensor"}, {"tensor_spec", t}},
            {{"name", "out"}, {"type", "tensor"}, {"role", "output"}, {"tensor_spec", t}}})},
      {"launch", {{"grid", {{"x", 1}}}}}};
}

std::string error_of(KernelTool tool, const Json& args) {
  std::vector<std::string> warnings;
  auto r = job_request_from_arguments(tool, args, model::RequestLimits{}, warnings);
  return r.is_ok() ? std::string("ok") : r.status().to_string();
}

TEST(KernelToolArgsTest, EvaluateMapsOntoTheRestBodyWithTheOldDefaults) {
  std::vector<std::string> warnings;
  Json args = {{"kernel_source", "k"},
               {"kernel_type", "triton"},
               {"io_contract", io_contract()},
               {"metadata", {{"entry_point", "k"}}},
               {"reference_kernel_source", kTorch},
               {"device", "cpu"},
               {"enable_device_metrics", true}};
  auto body = rest_body_from_arguments(KernelTool::kEvaluate, args, warnings);
  ASSERT_TRUE(body.is_ok());
  EXPECT_EQ((*body)["kernel"]["source_code"], "k");
  EXPECT_EQ((*body)["kernel"]["io"], io_contract());
  EXPECT_EQ((*body)["reference_kernel"]["kernel_type"], "torch");  // the default
  EXPECT_EQ((*body)["num_trials"], kDefaultNumTrials);
  EXPECT_EQ((*body)["num_warmup"], kDefaultNumWarmup);
  EXPECT_EQ((*body)["timeout"], kDefaultTimeoutS);
  EXPECT_EQ((*body)["device"], "cpu");
  EXPECT_EQ((*body)["enable_device_metrics"], true);
  EXPECT_TRUE(warnings.empty());

  auto request = job_request_from_arguments(KernelTool::kEvaluate, args, {}, warnings);
  ASSERT_TRUE(request.is_ok()) << request.status().to_string();
  EXPECT_EQ(request->kind, model::JobKind::kCompare);
  EXPECT_EQ(request->timing.max_trials, 100);
  EXPECT_EQ(request->timing.warmup_calls, 10);
  EXPECT_TRUE(request->measure_performance);
  EXPECT_EQ(request->enable_device_metrics, true);
}

TEST(KernelToolArgsTest, ValidateDoesNotTime) {
  std::vector<std::string> warnings;
  auto request = job_request_from_arguments(
      KernelTool::kValidate, Json{{"kernel_source", kTorch}, {"kernel_type", "torch"}}, {},
      warnings);
  ASSERT_TRUE(request.is_ok());
  EXPECT_FALSE(request->measure_performance);
  EXPECT_EQ(request->kind, model::JobKind::kEvaluate);
  EXPECT_DOUBLE_EQ(request->timeout_s, kDefaultValidateTimeoutS);
}

TEST(KernelToolArgsTest, CompareMapsBothSides) {
  std::vector<std::string> warnings;
  Json args = {{"ref_kernel_source", kTorch},
               {"ref_kernel_type", "torch"},
               {"custom_kernel_source", "k"},
               {"custom_kernel_type", "triton"},
               {"custom_kernel_io", io_contract()},
               {"custom_kernel_metadata", {{"entry_point", "k"}}},
               {"atol", 0.5},
               {"num_trials", 7}};
  auto request = job_request_from_arguments(KernelTool::kCompare, args, {}, warnings);
  ASSERT_TRUE(request.is_ok()) << request.status().to_string();
  EXPECT_EQ(request->kernel.kernel_type, model::KernelType::kTriton);
  EXPECT_EQ(request->reference->kernel_type, model::KernelType::kTorch);
  EXPECT_EQ(request->atol, 0.5);
  EXPECT_EQ(request->timing.max_trials, 7);
}

TEST(KernelToolArgsTest, ErrorsNameTheToolsArguments) {
  Json triton = {{"kernel_source", "k"}, {"kernel_type", "triton"}};
  EXPECT_EQ(error_of(KernelTool::kEvaluate, triton).rfind("io_contract: is required", 0), 0u)
      << error_of(KernelTool::kEvaluate, triton);
  Json bad_shape = triton;
  bad_shape["io_contract"] = io_contract();
  bad_shape["io_contract"]["args"][1]["tensor_spec"]["shape"] = {-4};
  EXPECT_EQ(error_of(KernelTool::kEvaluate, bad_shape),
            "io_contract.args[1].tensor_spec.shape: must be a list of non-negative integers");
  Json compare = {{"ref_kernel_source", "  "},
                  {"ref_kernel_type", "torch"},
                  {"custom_kernel_source", kTorch},
                  {"custom_kernel_type", "torch"}};
  EXPECT_EQ(error_of(KernelTool::kCompare, compare), "ref_kernel_source: must not be empty");
  Json orphan = {
      {"kernel_source", kTorch}, {"kernel_type", "torch"}, {"reference_kernel_type", "torch"}};
  EXPECT_EQ(error_of(KernelTool::kEvaluate, orphan),
            "reference_kernel_type: is given but reference_kernel_source is not: pass the "
            "reference's source too");
}

TEST(KernelToolArgsTest, RestPathsAreRenamedInPathsAndMessages) {
  EXPECT_EQ(argument_path(KernelTool::kEvaluate, "kernel.io.args[2].tensor_spec.shape"),
            "io_contract.args[2].tensor_spec.shape");
  EXPECT_EQ(argument_path(KernelTool::kEvaluate, "kernel.metadata.entry_point"),
            "metadata.entry_point");
  EXPECT_EQ(argument_path(KernelTool::kEvaluate, "kernel.iox"), "kernel.iox");
  EXPECT_EQ(argument_path(KernelTool::kCompare, "custom_kernel.io[0]"), "custom_kernel_io[0]");
  EXPECT_EQ(argument_path(KernelTool::kCompare, "timing.budget_ms"), "timing.budget_ms");
  Status s = in_argument_terms(
      KernelTool::kCompare,
      invalid_argument("the declared inputs disagree: ref_kernel.io has [x] but custom_kernel.io "
                       "has [y]",
                       "custom_kernel.io.args"));
  EXPECT_EQ(s.field_path(), "custom_kernel_io.args");
  EXPECT_EQ(s.message(),
            "the declared inputs disagree: ref_kernel_io has [x] but custom_kernel_io has [y]");
}

TEST(KernelToolArgsTest, NormalizeDropsNullsAndUnwrapsRequest) {
  Json flat = {{"kernel_source", "k"}, {"io_contract", nullptr}, {"metadata", {{"x", nullptr}}}};
  EXPECT_EQ(normalize_arguments(flat),
            (Json{{"kernel_source", "k"}, {"metadata", Json::object()}}));
  // {"request": <flat arguments>}
  EXPECT_EQ(normalize_arguments(Json{{"request", {{"kernel_source", "k"}, {"atol", nullptr}}}}),
            (Json{{"kernel_source", "k"}}));
  // {"request": <EvaluationRequest>}
  Json evaluation = {{"request",
                      {{"kernel",
                        {{"source_code", "s"},
                         {"kernel_type", "triton"},
                         {"io", io_contract()},
                         {"metadata", {{"entry_point", "k"}}}}},
                       {"num_trials", 3},
                       {"timeout", 30}}}};
  EXPECT_EQ(normalize_arguments(evaluation), (Json{{"kernel_source", "s"},
                                                   {"kernel_type", "triton"},
                                                   {"io_contract", io_contract()},
                                                   {"metadata", {{"entry_point", "k"}}},
                                                   {"num_trials", 3},
                                                   {"timeout", 30}}));
  // {"request": <CompareRequest>}
  Json compare = {{"request",
                   {{"ref_kernel", {{"source_code", "r"}, {"kernel_type", "torch"}}},
                    {"custom_kernel", {{"source_code", "c"}, {"kernel_type", "cuda"}}},
                    {"rtol", 0.1}}}};
  EXPECT_EQ(normalize_arguments(compare), (Json{{"ref_kernel_source", "r"},
                                                {"ref_kernel_type", "torch"},
                                                {"custom_kernel_source", "c"},
                                                {"custom_kernel_type", "cuda"},
                                                {"rtol", 0.1}}));
  // Anything else is left for validation to name.
  Json two = {{"request", Json::object()}, {"kernel_source", "k"}};
  EXPECT_EQ(normalize_arguments(two), two);
  EXPECT_EQ(normalize_arguments(Json{{"request", "x"}}), (Json{{"request", "x"}}));
}

}  // namespace
}  // namespace kforge::frontends::mcp
