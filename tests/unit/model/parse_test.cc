#include "kforge/model/parse.h"

#include <gtest/gtest.h>

#include <limits>

#include "kforge/common/base64.h"
#include "kforge/model/serialize.h"

namespace kforge::model {
namespace {

const RequestLimits kLimits;

Json triton_kernel() {
  return Json::parse(R"({
    "source_code": "import triton\n",
    "kernel_type": "triton",
    "metadata": {"entry_point": "add_kernel"},
    "io": {"args": [
      {"name": "x", "type": "tensor", "tensor_spec": {"shape": [1024], "dtype": "float32",
                                                      "init": {"kind": "randn", "seed": 1}}},
      {"name": "y", "type": "tensor", "tensor_spec": {"shape": [1024], "dtype": "float32"}},
      {"name": "out", "type": "tensor", "role": "output",
       "tensor_spec": {"shape": [1024], "dtype": "float32"}},
      {"name": "n", "type": "int", "value": 1024},
      {"name": "BLOCK", "type": "int", "value": 256, "is_meta": true}],
     "launch": {"grid": {"x": 4}, "num_warps": 4}}
  })");
}

Json torch_kernel() {
  return Json{{"source_code", "class Model: pass"}, {"kernel_type", "torch"}};
}

Status compare_error(Json body) {
  return parse_compare_request(body, kLimits).status();
}

TEST(ParseTest, AcceptsValidCompareAndFillsDefaults) {
  Json body = {{"ref_kernel", torch_kernel()}, {"custom_kernel", triton_kernel()}};
  auto req = parse_compare_request(body, kLimits);
  ASSERT_TRUE(req.is_ok()) << req.status().to_string();
  EXPECT_EQ(req->kind, JobKind::kCompare);
  EXPECT_EQ(req->kernel.kernel_type, KernelType::kTriton);
  ASSERT_TRUE(req->kernel.io.has_value());
  EXPECT_EQ(req->kernel.io->args.size(), 5u);
  EXPECT_EQ(req->kernel.io->input_tensors().size(), 2u);
  EXPECT_EQ(req->kernel.io->output_tensors().size(), 1u);
  EXPECT_EQ(req->kernel.io->launch->grid->x, 4);
  EXPECT_EQ(req->kernel.io->launch->grid->y, 1);
  EXPECT_EQ(req->num_correct_trials, 5);
  EXPECT_EQ(req->timing.max_trials, 100);
  EXPECT_DOUBLE_EQ(req->timeout_s, 120.0);
  EXPECT_EQ(req->kernel.entry_point(), "add_kernel");
}

TEST(ParseTest, NamesTheJsonPathOfABadShape) {
  Json kernel = triton_kernel();
  kernel["io"]["args"][2]["tensor_spec"]["shape"] = Json::array({4, -1});
  Status s = compare_error({{"ref_kernel", torch_kernel()}, {"custom_kernel", kernel}});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.field_path(), "custom_kernel.io.args[2].tensor_spec.shape");
  EXPECT_EQ(s.to_string(),
            "custom_kernel.io.args[2].tensor_spec.shape: must be a list of non-negative integers");
}

TEST(ParseTest, RejectsWrongTypesAndMissingFields) {
  EXPECT_EQ(compare_error({{"custom_kernel", triton_kernel()}}).field_path(), "ref_kernel");
  EXPECT_EQ(compare_error(Json::array()).field_path(), "<root>");
  Json k = torch_kernel();
  k["kernel_type"] = "fortran";
  Status s = compare_error({{"ref_kernel", k}, {"custom_kernel", torch_kernel()}});
  EXPECT_EQ(s.field_path(), "ref_kernel.kernel_type");
  EXPECT_NE(s.message().find("torch, torch_cuda, triton"), std::string::npos);
  Json body = {
      {"ref_kernel", torch_kernel()}, {"custom_kernel", torch_kernel()}, {"num_trials", "many"}};
  EXPECT_EQ(compare_error(body).field_path(), "num_trials");
  body["num_trials"] = 0;
  EXPECT_EQ(compare_error(body).field_path(), "num_trials");
  body["num_trials"] = 10;
  body["timeout"] = -1;
  EXPECT_EQ(compare_error(body).field_path(), "timeout");
}

TEST(ParseTest, TritonNeedsAnIoContract) {
  Json k = triton_kernel();
  k.erase("io");
  Status s = compare_error({{"ref_kernel", torch_kernel()}, {"custom_kernel", k}});
  EXPECT_EQ(s.field_path(), "custom_kernel.io");
  // The old server's wording, which its clients look for, names the field io_contract.
  EXPECT_NE(s.message().find("Triton kernels require io_contract to be specified"),
            std::string::npos)
      << s.message();
  Status ref = compare_error({{"ref_kernel", k}, {"custom_kernel", torch_kernel()}});
  EXPECT_EQ(ref.field_path(), "ref_kernel.io");
  EXPECT_NE(ref.message().find("io_contract"), std::string::npos) << ref.message();
  Status evaluate = parse_evaluate_request({{"kernel", k}}, kLimits).status();
  EXPECT_EQ(evaluate.field_path(), "kernel.io");
  EXPECT_NE(evaluate.message().find("io_contract"), std::string::npos) << evaluate.message();
  k["io"] = {{"args", Json::array()}};  // declared, but no arguments: as good as none
  EXPECT_NE(compare_error({{"ref_kernel", torch_kernel()}, {"custom_kernel", k}})
                .message()
                .find("io_contract"),
            std::string::npos);
}

TEST(ParseTest, MultiKernelNeedsEntryPoint) {
  Json k = triton_kernel();
  k["kernel_type"] = "multi_kernel";
  k["metadata"] = Json::object();
  Status s = parse_evaluate_request({{"kernel", k}}, kLimits).status();
  EXPECT_EQ(s.field_path(), "kernel.metadata.entry_point");
}

TEST(ParseTest, InitAndDataAreExclusiveAndDataIsChecked) {
  Json k = triton_kernel();
  auto& spec = k["io"]["args"][0]["tensor_spec"];
  spec["data"] = {{"data_b64", "AAAA"}, {"dtype", "float32"}, {"shape", {1024}}};
  EXPECT_EQ(parse_evaluate_request({{"kernel", k}}, kLimits).status().field_path(),
            "kernel.io.args[0].tensor_spec");
  spec.erase("init");
  Status s = parse_evaluate_request({{"kernel", k}}, kLimits).status();
  EXPECT_EQ(s.field_path(), "kernel.io.args[0].tensor_spec.data.data_b64");
  EXPECT_NE(s.message().find("4096"), std::string::npos);
  spec["data"]["data_b64"] = base64_encode(std::string(4096, '\0'));
  EXPECT_TRUE(parse_evaluate_request({{"kernel", k}}, kLimits).is_ok());
  spec["data"]["data_b64"] = "!!!!";
  EXPECT_EQ(parse_evaluate_request({{"kernel", k}}, kLimits).status().field_path(),
            "kernel.io.args[0].tensor_spec.data.data_b64");
}

TEST(ParseTest, InlineDataIsBoundedBeforeItIsDecoded) {
  // Found by the request_parser fuzz target: 20 bytes of zlib declaring 4.2 G floats made the
  // parser allocate 17 GB to inflate them into.
  Json k = triton_kernel();
  auto& spec = k["io"]["args"][0]["tensor_spec"];
  spec.erase("init");
  spec["data"] = {{"data_b64", "eJxjYGiwZ2BgcAAiIG5wAAAQgwJA"},
                  {"dtype", "float32"},
                  {"shape", {int64_t{4255555555}}},
                  {"compress", "zlib"}};
  Status s = parse_evaluate_request({{"kernel", k}}, kLimits).status();
  EXPECT_EQ(s.field_path(), "kernel.io.args[0].tensor_spec.data.shape");
  EXPECT_NE(s.message().find("inline tensor data is larger than the limit of 268435456 bytes"),
            std::string::npos)
      << s.message();
  spec["data"]["shape"] = {int64_t{1} << 40, int64_t{1} << 40};  // overflows int64 unchecked
  EXPECT_EQ(parse_evaluate_request({{"kernel", k}}, kLimits).status().field_path(),
            "kernel.io.args[0].tensor_spec.data.shape");
}

TEST(ParseTest, RejectsTensorsOverTheSizeLimit) {
  RequestLimits small;
  small.max_tensor_bytes = 1000;
  Json k = triton_kernel();
  Status s = parse_evaluate_request({{"kernel", k}}, small).status();
  EXPECT_EQ(s.field_path(), "kernel.io.args[0].tensor_spec.shape");
  k["io"]["args"][0]["tensor_spec"]["shape"] = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(parse_evaluate_request({{"kernel", k}}, kLimits).status().field_path(),
            "kernel.io.args[0].tensor_spec.shape");
}

TEST(ParseTest, ScalarArgsNeedMatchingValues) {
  Json k = triton_kernel();
  k["io"]["args"][3]["value"] = "1024";
  EXPECT_EQ(parse_evaluate_request({{"kernel", k}}, kLimits).status().field_path(),
            "kernel.io.args[3].value");
  k["io"]["args"][3]["value"] = 1024;
  k["io"]["args"][3]["role"] = "output";
  EXPECT_EQ(parse_evaluate_request({{"kernel", k}}, kLimits).status().field_path(),
            "kernel.io.args[3].role");
}

TEST(ParseTest, DuplicateArgNamesAndBadLaunch) {
  Json k = triton_kernel();
  k["io"]["args"][1]["name"] = "x";
  EXPECT_EQ(parse_evaluate_request({{"kernel", k}}, kLimits).status().field_path(),
            "kernel.io.args[1].name");
  k = triton_kernel();
  k["io"]["launch"]["num_warps"] = 3;
  EXPECT_EQ(parse_evaluate_request({{"kernel", k}}, kLimits).status().field_path(),
            "kernel.io.launch.num_warps");
  k = triton_kernel();
  k["io"]["launch"]["grid"] = {{"x", 0}};
  EXPECT_EQ(parse_evaluate_request({{"kernel", k}}, kLimits).status().field_path(),
            "kernel.io.launch.grid.x");
}

TEST(ParseTest, DisagreeingDeclaredInputsNameBothSides) {
  Json ref = triton_kernel();
  ref["kernel_type"] = "torch";
  ref["io"]["args"][1]["tensor_spec"]["shape"] = {512};
  Status s = compare_error({{"ref_kernel", ref}, {"custom_kernel", triton_kernel()}});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ref_kernel.io"), std::string::npos);
  EXPECT_NE(s.message().find("custom_kernel.io"), std::string::npos);
  EXPECT_NE(s.message().find("[512]"), std::string::npos);
}

TEST(ParseTest, RoundTripsThroughCanonicalJson) {
  Json body = {{"ref_kernel", torch_kernel()},
               {"custom_kernel", triton_kernel()},
               {"num_trials", 7},
               {"atol", 0.5},
               {"device", "cpu"},
               {"timing", {{"budget_ms", 20}, {"cuda_graph", true}}}};
  auto first = parse_compare_request(body, kLimits);
  ASSERT_TRUE(first.is_ok());
  Json canonical = to_request_json(*first);
  auto second = parse_compare_request(canonical, kLimits);
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_EQ(to_request_json(*second), canonical);
  EXPECT_EQ(second->timing.max_trials, 7);
  EXPECT_TRUE(second->timing.cuda_graph);
  EXPECT_DOUBLE_EQ(second->timing.budget_ms, 20.0);
  EXPECT_EQ(second->device, "cpu");
}

TEST(ParseTest, EvaluateWithReferenceBecomesACompare) {
  Json body = {{"kernel", triton_kernel()}, {"reference_kernel", torch_kernel()}};
  auto req = parse_evaluate_request(body, kLimits);
  ASSERT_TRUE(req.is_ok());
  EXPECT_EQ(req->kind, JobKind::kCompare);
  ASSERT_TRUE(req->reference.has_value());
  EXPECT_EQ(req->reference->kernel_type, KernelType::kTorch);
}

}  // namespace
}  // namespace kforge::model

namespace kforge::model {
namespace {

// Issue #8 item 10: `seed: -1` became 2^64 - 1. Out-of-range integers are 400s naming the
// field, never wrapped.
TEST(ParseRangeTest, SeedIsAnUnsigned64BitIntegerAndNeverWraps) {
  auto with_seed = [](Json seed) {
    Json body = {{"kernel", torch_kernel()}, {"seed", std::move(seed)}};
    return parse_evaluate_request(body, kLimits);
  };
  auto max = with_seed(Json(std::numeric_limits<uint64_t>::max()));
  ASSERT_TRUE(max.is_ok()) << max.status().to_string();
  EXPECT_EQ(*max->seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*with_seed(Json(0))->seed, 0u);
  for (const char* bad :
       {"-1", "-9223372036854775808", "18446744073709551616", "1.5", "1e30", "\"7\"", "true"}) {
    auto r = with_seed(Json::parse(bad));
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().field_path(), "seed") << bad;
    EXPECT_NE(r.status().message().find("between 0 and 18446744073709551615"), std::string::npos)
        << r.status().message();
  }
}

TEST(ParseRangeTest, IntegersBeyondInt64AreRefusedWhereverTheyAppear) {
  const Json too_big = Json::parse("9223372036854775808");  // 2^63: a uint64 in nlohmann
  Json k = triton_kernel();
  k["io"]["args"][3]["value"] = too_big;
  Status s = compare_error({{"ref_kernel", torch_kernel()}, {"custom_kernel", k}});
  EXPECT_EQ(s.field_path(), "custom_kernel.io.args[3].value") << s.to_string();
  k = triton_kernel();
  k["io"]["args"][0]["tensor_spec"]["shape"] = Json::array({too_big});
  EXPECT_EQ(compare_error({{"ref_kernel", torch_kernel()}, {"custom_kernel", k}}).field_path(),
            "custom_kernel.io.args[0].tensor_spec.shape");
  k = triton_kernel();
  k["io"]["launch"]["grid"] = Json::array({too_big});
  EXPECT_EQ(compare_error({{"ref_kernel", torch_kernel()}, {"custom_kernel", k}}).field_path(),
            "custom_kernel.io.launch.grid[0]");
  k = triton_kernel();
  k["io"]["args"][0]["tensor_spec"]["init"]["seed"] = too_big;
  EXPECT_EQ(compare_error({{"ref_kernel", torch_kernel()}, {"custom_kernel", k}}).field_path(),
            "custom_kernel.io.args[0].tensor_spec.init.seed");
  for (const char* field : {"num_trials", "num_correct_trials", "num_warmup"}) {
    Json body = {{"kernel", torch_kernel()}, {field, too_big}};
    EXPECT_EQ(parse_evaluate_request(body, kLimits).status().field_path(), field);
    body[field] = -1;
    EXPECT_EQ(parse_evaluate_request(body, kLimits).status().field_path(), field);
  }
}

}  // namespace
}  // namespace kforge::model
