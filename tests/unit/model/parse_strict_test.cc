// Issue #37 "strict input": a field given as "" names no value and is refused ("must not be
// empty", with its JSON path) wherever a value is required; leaving it out (or null) still
// means its default.
#include <gtest/gtest.h>

#include "kforge/model/batch.h"
#include "kforge/model/parse.h"

namespace kforge::model {
namespace {

const RequestLimits kStrictLimits;

Json strict_triton_kernel() {
  return Json::parse(R"({
    "source_code": "import triton\n",
    "kernel_type": "triton",
    "metadata": {"kernel_name": "add_kernel"},
    "io": {"args": [
      {"name": "x", "type": "tensor", "role": "input",
       "tensor_spec": {"shape": [4], "dtype": "float32", "init": {"kind": "randn"}}},
      {"name": "out", "type": "tensor", "role": "output",
       "tensor_spec": {"shape": [4], "dtype": "float32"}},
      {"name": "n", "type": "int", "value": 4}]}
  })");
}

Json strict_torch_kernel() {
  return Json{{"source_code", "class Model: pass"}, {"kernel_type", "torch"}};
}

Status evaluate_status(const Json& kernel) {
  return parse_evaluate_request(Json{{"kernel", kernel}}, kStrictLimits).status();
}

void expect_empty_refused(const Status& s, const std::string& field) {
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << field;
  EXPECT_EQ(s.field_path(), field);
  EXPECT_EQ(s.message().rfind("must not be empty", 0), 0u) << s.to_string();
}

TEST(ParseStrictTest, EmptyEnumsAreRefusedNamingTheirPath) {
  ASSERT_TRUE(evaluate_status(strict_triton_kernel()).is_ok());
  const std::pair<Json::json_pointer, std::string> cases[] = {
      {Json::json_pointer("/kernel_type"), "kernel.kernel_type"},
      {Json::json_pointer("/io/args/0/type"), "kernel.io.args[0].type"},
      {Json::json_pointer("/io/args/0/role"), "kernel.io.args[0].role"},
      {Json::json_pointer("/io/args/0/tensor_spec/dtype"), "kernel.io.args[0].tensor_spec.dtype"},
      {Json::json_pointer("/io/args/0/tensor_spec/init/kind"),
       "kernel.io.args[0].tensor_spec.init.kind"},
      {Json::json_pointer("/io/args/0/name"), "kernel.io.args[0].name"},
      {Json::json_pointer("/metadata/kernel_name"), "kernel.metadata.kernel_name"},
      {Json::json_pointer("/metadata/flops_dtype"), "kernel.metadata.flops_dtype"},
  };
  for (const auto& [pointer, field] : cases) {
    Json kernel = strict_triton_kernel();
    kernel[pointer] = "";
    expect_empty_refused(evaluate_status(kernel), field);
  }
  // The message still lists what is allowed.
  Json kernel = strict_triton_kernel();
  kernel["kernel_type"] = "";
  EXPECT_NE(evaluate_status(kernel).message().find("torch, torch_cuda, triton"), std::string::npos);
}

TEST(ParseStrictTest, AbsentOrNullStillMeansTheDefault) {
  Json kernel = strict_triton_kernel();
  kernel["io"]["args"][0].erase("type");
  kernel["io"]["args"][0]["role"] = nullptr;
  kernel["io"]["args"][0]["tensor_spec"].erase("dtype");
  kernel["io"]["args"][0]["tensor_spec"]["init"]["kind"] = nullptr;
  auto request = parse_evaluate_request(Json{{"kernel", kernel}}, kStrictLimits);
  ASSERT_TRUE(request.is_ok()) << request.status().to_string();
  const ArgSpec& x = request->kernel.io->args[0];
  EXPECT_EQ(x.type, ArgType::kTensor);
  EXPECT_EQ(x.role, ArgRole::kInput);
  EXPECT_EQ(x.tensor_spec->dtype, DType::kFloat32);
  EXPECT_EQ(x.tensor_spec->init->kind, InitKind::kRandn);
}

TEST(ParseStrictTest, EmptyTensorDataFieldsAreRefused) {
  Json kernel = strict_triton_kernel();
  kernel["io"]["args"][0]["tensor_spec"].erase("init");
  kernel["io"]["args"][0]["tensor_spec"]["data"] = {
      {"data_b64", "AAAAAAAAAAAAAAAAAAAAAA=="}, {"dtype", ""}, {"shape", {4}}};
  expect_empty_refused(evaluate_status(kernel), "kernel.io.args[0].tensor_spec.data.dtype");
  kernel["io"]["args"][0]["tensor_spec"]["data"]["dtype"] = "float32";
  kernel["io"]["args"][0]["tensor_spec"]["data"]["compress"] = "";
  expect_empty_refused(evaluate_status(kernel), "kernel.io.args[0].tensor_spec.data.compress");
}

TEST(ParseStrictTest, EmptyTorchTargetsAndSourcesAreRefused) {
  Json kernel = strict_torch_kernel();
  kernel["metadata"] = {{"function_name", ""}};
  expect_empty_refused(evaluate_status(kernel), "kernel.metadata.function_name");
  kernel = strict_torch_kernel();
  kernel["source_code"] = "";
  expect_empty_refused(evaluate_status(kernel), "kernel.source_code");
  kernel = strict_torch_kernel();
  kernel["metadata"] = {{"compile_options", Json::array({""})}};
  kernel["kernel_type"] = "cuda";
  kernel["source_code"] = "extern \"C\" __global__ void k(float* o) {}";
  kernel["io"] = {
      {"args", {{{"name", "o"}, {"role", "output"}, {"tensor_spec", {{"shape", {4}}}}}}},
      {"launch", {{"grid", {1}}, {"block", {4}}}}};
  expect_empty_refused(evaluate_status(kernel), "kernel.metadata.compile_options[0]");
}

TEST(ParseStrictTest, CompareLegacyAndBatchBodiesNameTheirOwnPaths) {
  Json ref = strict_torch_kernel();
  ref["kernel_type"] = "";
  Status s = parse_compare_request(
                 Json{{"ref_kernel", ref}, {"custom_kernel", strict_torch_kernel()}}, kStrictLimits)
                 .status();
  expect_empty_refused(s, "ref_kernel.kernel_type");
  s = parse_compare_request(Json{{"ref_code", ""}, {"custom_code", "class ModelNew: pass"}},
                            kStrictLimits)
          .status();
  expect_empty_refused(s, "ref_code");
  Json candidate = strict_triton_kernel();
  candidate["io"]["args"][1]["tensor_spec"]["dtype"] = "";
  s = parse_batch_request(Json{{"ref_kernel", strict_torch_kernel()},
                               {"candidates", Json::array({strict_triton_kernel(), candidate})}},
                          kStrictLimits)
          .status();
  expect_empty_refused(s, "candidates[1].io.args[1].tensor_spec.dtype");
}

TEST(ParseStrictTest, AnEmptyDeviceStillLetsTheSchedulerChoose) {
  // Documented (docs/rest-api.md "Fields common to /evaluate and /compare"): "" is a value.
  auto request = parse_evaluate_request(Json{{"kernel", strict_torch_kernel()}, {"device", ""}},
                                        kStrictLimits);
  ASSERT_TRUE(request.is_ok()) << request.status().to_string();
  EXPECT_EQ(request->device, "");
}

}  // namespace
}  // namespace kforge::model
