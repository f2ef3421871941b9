// Host-side input generation and output comparison of the native CUDA worker.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kforge/cuda/host_compare.h"
#include "kforge/cuda/host_inputs.h"
#include "kforge/cuda/host_tensor.h"
#include "kforge/model/parse.h"

namespace kforge::cuda {
namespace {

using model::DType;

model::IOContract io_of(const char* text) {
  // As the native worker reads its spec: the inline data's decoded bytes are kept.
  auto io = model::parse_io_contract(Json::parse(text), JsonPath("io"), model::RequestLimits{},
                                     model::InlineData::kKeep);
  EXPECT_TRUE(io.is_ok()) << io.status().to_string();
  return *io;
}

TEST(HostInputsTest, SeedDerivationMatchesThePythonWorker) {
  // python: int.from_bytes(sha256(b"1234:trial:0:arg:x:init:None").digest()[:8], "little") >> 1
  EXPECT_EQ(derive_seed(1234, {"trial", "0", "arg", "x", "init", "None"}), 7057073207711949385ull);
}

TEST(HostInputsTest, InputsAreReproduciblePerTrialAndDifferAcrossTrials) {
  const auto io = io_of(R"({"args": [
      {"name": "x", "type": "tensor", "tensor_spec": {"shape": [64, 4], "dtype": "float32"}},
      {"name": "out", "type": "tensor", "role": "output",
       "tensor_spec": {"shape": [64, 4], "dtype": "float32"}},
      {"name": "n", "type": "int", "value": 256}]})");
  auto a = make_host_inputs(io, 99, 0);
  auto b = make_host_inputs(io, 99, 0);
  auto c = make_host_inputs(io, 99, 1);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  ASSERT_EQ(a->size(), 2u);  // tensors only, declared order
  EXPECT_EQ((*a)[0].spec->name, "x");
  EXPECT_TRUE(same_bits((*a)[0].data, (*b)[0].data));
  EXPECT_FALSE(same_bits((*a)[0].data, (*c)[0].data));
  // randn: roughly zero mean, unit variance over 256 draws.
  double sum = 0;
  double sq = 0;
  for (int64_t i = 0; i < 256; ++i) {
    sum += (*a)[0].data.get(i);
    sq += (*a)[0].data.get(i) * (*a)[0].data.get(i);
  }
  EXPECT_LT(std::fabs(sum / 256), 0.25);
  EXPECT_NEAR(sq / 256, 1.0, 0.3);
  // Outputs are zero-filled buffers of the right size.
  EXPECT_EQ((*a)[1].data.bytes.size(), 64u * 4 * 4);
}

TEST(HostInputsTest, LargeTensorsAreReproducibleAndChunksDiffer) {
  // Several generator chunks (65536 elements each), filled in parallel.
  model::TensorSpec spec;
  spec.shape = {5, 65536};
  spec.dtype = DType::kFloat32;
  auto a = make_host_tensor(spec, 42);
  auto b = make_host_tensor(spec, 42);
  auto c = make_host_tensor(spec, 43);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  EXPECT_TRUE(same_bits(*a, *b));
  EXPECT_FALSE(same_bits(*a, *c));
  for (int64_t chunk = 1; chunk < 5; ++chunk) {
    EXPECT_NE(a->get(0), a->get(chunk * 65536)) << "chunk " << chunk << " repeats chunk 0";
  }
  double sum = 0;
  for (int64_t i = 0; i < a->numel(); ++i)
    sum += a->get(i);
  EXPECT_LT(std::fabs(sum / static_cast<double>(a->numel())), 0.02);
}

TEST(HostInputsTest, DeterministicInitKinds) {
  const auto io = io_of(R"({"args": [
      {"name": "r", "type": "tensor", "tensor_spec": {"shape": [5], "dtype": "int32",
        "init": {"kind": "arange", "start": 3, "step": 2}}},
      {"name": "f", "type": "tensor", "tensor_spec": {"shape": [3], "dtype": "float16",
        "init": {"kind": "full", "fill_value": 1.5}}},
      {"name": "u", "type": "tensor", "tensor_spec": {"shape": [1000], "dtype": "float32",
        "init": {"kind": "uniform", "low": 2, "high": 3}}}]})");
  auto inputs = make_host_inputs(io, 7, 0);
  ASSERT_TRUE(inputs.is_ok()) << inputs.status().to_string();
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ((*inputs)[0].data.get_int(i), 3 + 2 * i);
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_EQ((*inputs)[1].data.get(i), 1.5);
  for (int64_t i = 0; i < 1000; ++i) {
    const double v = (*inputs)[2].data.get(i);
    ASSERT_GE(v, 2.0);
    ASSERT_LT(v, 3.0);
  }
}

TEST(HostTensorTest, HalfAndBfloat16RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.333251953125f}) {
    EXPECT_EQ(half_to_float(float_to_half(f)), f) << f;
  }
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(3.140625f)), 3.140625f);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
}

TEST(HostTensorTest, PoisonVariantsDifferEverywhere) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kInt32, DType::kBool}) {
    HostTensor a = HostTensor::zeros(dtype, {17});
    HostTensor b = HostTensor::zeros(dtype, {17});
    fill_poison(a, 0);
    fill_poison(b, 1);
    for (int64_t i = 0; i < 17; ++i) {
      EXPECT_TRUE(is_poison(a, i, 0));
      EXPECT_TRUE(is_poison(b, i, 1));
      EXPECT_FALSE(is_poison(a, i, 1));
    }
  }
}

TEST(HostCompareTest, DefaultTolerancesPerDtype) {
  EXPECT_EQ(resolve_tolerance(DType::kFloat32, std::nullopt, std::nullopt).atol, 1e-2);
  EXPECT_EQ(resolve_tolerance(DType::kFloat32, std::nullopt, std::nullopt).rtol, 1e-2);
  EXPECT_EQ(resolve_tolerance(DType::kFloat64, std::nullopt, std::nullopt).atol, 1e-6);
  EXPECT_EQ(resolve_tolerance(DType::kBFloat16, std::nullopt, std::nullopt).rtol, 1e-2);
  EXPECT_EQ(resolve_tolerance(DType::kInt32, std::nullopt, std::nullopt).atol, 0.0);
  EXPECT_EQ(resolve_tolerance(DType::kFloat32, 0.5, std::nullopt).atol, 0.5);
  EXPECT_EQ(resolve_tolerance(DType::kBool, 1.0, 1.0).atol, 0.0);  // bool is always exact
}

TEST(HostCompareTest, ReportsMaxErrorAndFirstMismatch) {
  HostTensor expected = HostTensor::zeros(DType::kFloat32, {2, 3});
  HostTensor actual = HostTensor::zeros(DType::kFloat32, {2, 3});
  for (int64_t i = 0; i < 6; ++i) {
    expected.set(i, static_cast<double>(i) + 1);
    actual.set(i, static_cast<double>(i) + 1);
  }
  actual.set(4, 5.5);  // expected 5
  actual.set(5, 6.25);
  auto c = compare_host_tensors("out", expected, actual, {1e-4, 1e-4});
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.mismatch_count, 2);
  EXPECT_DOUBLE_EQ(c.max_abs_error, 0.5);
  EXPECT_DOUBLE_EQ(c.max_rel_error, 0.1);
  ASSERT_TRUE(c.first_mismatch.has_value());
  EXPECT_EQ(c.first_mismatch->index, (std::vector<int64_t>{1, 1}));
  EXPECT_NE(c.describe().find("2 of 6 elements differ (max abs error 0.5"), std::string::npos)
      << c.describe();
  EXPECT_TRUE(compare_host_tensors("out", expected, actual, {0.5, 0}).passed);
}

TEST(HostCompareTest, NanIsNeverAWildcard) {
  HostTensor expected = HostTensor::zeros(DType::kFloat32, {3});
  HostTensor actual = HostTensor::zeros(DType::kFloat32, {3});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expected.set(0, nan);
  actual.set(0, nan);  // both NaN: equal
  actual.set(1, nan);  // NaN where 0 is expected: a mismatch
  expected.set(2, std::numeric_limits<double>::infinity());
  actual.set(2, std::numeric_limits<double>::infinity());
  auto c = compare_host_tensors("out", expected, actual, {1, 1});
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.mismatch_count, 1);
  EXPECT_TRUE(std::isinf(c.max_abs_error));
  actual.set(1, 0);
  EXPECT_TRUE(compare_host_tensors("out", expected, actual, {0, 0}).passed);
}

TEST(HostCompareTest, IntegersAreExactByDefault) {
  HostTensor expected = HostTensor::zeros(DType::kInt64, {2});
  HostTensor actual = HostTensor::zeros(DType::kInt64, {2});
  expected.set_int(1, 1'000'000'000'000);
  actual.set_int(1, 1'000'000'000'001);
  EXPECT_FALSE(compare_host_tensors("i", expected, actual, {0, 0}).passed);
  EXPECT_TRUE(compare_host_tensors("i", expected, actual, {1, 0}).passed);
}

TEST(HostInputsTest, LiteralDataIsTheBytesTheParserDecodedOnce) {
  // float32 [1, 2, -3.5, 0.25], zlib'd (tests/protocol/specs/accepted_compare_cuda_inline_zlib).
  const auto io = io_of(R"({"args": [{"name": "x", "type": "tensor", "tensor_spec": {
      "shape": [4], "dtype": "float32", "data": {"data_b64": "eJxjYGiwZ2BgcGBgSDjAwNBgBwATwQLe",
      "dtype": "float32", "shape": [4], "compress": "zlib"}}}]})");
  ASSERT_NE(io.args[0].tensor_spec->data->bytes, nullptr);
  auto inputs = make_host_inputs(io, 1234, 0);
  ASSERT_TRUE(inputs.is_ok()) << inputs.status().to_string();
  EXPECT_EQ((*inputs)[0].data.get(1), 2.0);
  EXPECT_EQ((*inputs)[0].data.get(2), -3.5);
  EXPECT_EQ((*inputs)[0].data.get(3), 0.25);
  // A TensorData that did not come from the parser has no bytes: an error, never a decode.
  model::IOContract built = io;
  built.args[0].tensor_spec->data->bytes = nullptr;
  auto refused = make_host_inputs(built, 1234, 0);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("not decoded by the request parser"), std::string::npos)
      << refused.status().to_string();
}

TEST(HostInputsTest, TheServersParseChecksInlineDataAndDropsIt) {
  const Json io = Json::parse(R"({"args": [{"name": "x", "type": "tensor", "tensor_spec": {
      "shape": [4], "dtype": "float32", "data": {"data_b64": "eJxjYGiwZ2BgcGBgSDjAwNBgBwATwQLe",
      "dtype": "float32", "shape": [4], "compress": "zlib"}}}]})");
  auto checked = model::parse_io_contract(io, JsonPath("io"), model::RequestLimits{});
  ASSERT_TRUE(checked.is_ok()) << checked.status().to_string();
  EXPECT_EQ(checked->args[0].tensor_spec->data->bytes, nullptr);
  Json bad = io;
  bad["args"][0]["tensor_spec"]["data"]["shape"] = {5};
  bad["args"][0]["tensor_spec"]["shape"] = {5};
  auto refused = model::parse_io_contract(bad, JsonPath("io"), model::RequestLimits{});
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().field_path(), "io.args[0].tensor_spec.data.data_b64");
}

}  // namespace
}  // namespace kforge::cuda
