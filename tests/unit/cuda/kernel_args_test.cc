#include "kforge/cuda/kernel_args.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "fakes/fake_launcher.h"
#include "kforge/model/parse.h"

namespace kforge::cuda {
namespace {

using testing::FakeLauncher;

const model::RequestLimits kLimits;

// x, y: float32 inputs; out: float16 output; n: int; alpha: float; flag: bool; BLOCK: meta.
model::IOContract contract(const std::string& launch = R"({"grid": {"x": 8, "y": 2},
                                                         "block": [256, 1, 1],
                                                         "shared_mem_bytes": 4096})") {
  Json j = Json::parse(R"({"args": [
      {"name": "x", "type": "tensor", "tensor_spec": {"shape": [2048], "dtype": "float32"}},
      {"name": "n", "type": "int", "value": 2048},
      {"name": "BLOCK", "type": "int", "value": 256, "is_meta": true},
      {"name": "y", "type": "tensor", "tensor_spec": {"shape": [2048], "dtype": "float32"}},
      {"name": "alpha", "type": "float", "value": 0.5},
      {"name": "flag", "type": "bool", "value": true},
      {"name": "out", "type": "tensor", "role": "output",
       "tensor_spec": {"shape": [2048], "dtype": "float16"}}]})");
  j["launch"] = Json::parse(launch);
  auto io = model::parse_io_contract(j, JsonPath("io"), kLimits);
  EXPECT_TRUE(io.is_ok()) << io.status().to_string();
  return *io;
}

constexpr uint64_t kX = 0x7f0000001000;
constexpr uint64_t kY = 0x7f0000002000;
constexpr uint64_t kOut = 0x7f0000003000;
const std::vector<uint64_t> kPtrs = {kX, kY, kOut};

TEST(KernelArgsTest, MarshalsNonMetaArgumentsInDeclaredOrder) {
  const auto io = contract();
  // x, n, y, alpha, flag, out: BLOCK is a compile-time define, not a parameter.
  FakeLauncher launcher({8, 4, 8, 4, 1, 8});
  auto s = launch_with_contract(launcher, io, kPtrs, std::nullopt, nullptr);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_EQ(launcher.launches.size(), 1u);
  EXPECT_EQ(launcher.param_as<uint64_t>(0, 0), kX);
  EXPECT_EQ(launcher.param_as<int32_t>(0, 1), 2048);
  EXPECT_EQ(launcher.param_as<uint64_t>(0, 2), kY);
  EXPECT_EQ(launcher.param_as<float>(0, 3), 0.5f);
  EXPECT_EQ(launcher.param_as<uint8_t>(0, 4), 1);
  EXPECT_EQ(launcher.param_as<uint64_t>(0, 5), kOut);
}

TEST(KernelArgsTest, LaunchDimensionsAndSharedMemoryComeFromTheContract) {
  const auto io = contract();
  FakeLauncher launcher({8, 4, 8, 4, 1, 8});
  int stream_tag = 0;
  auto* stream = reinterpret_cast<CUstream>(&stream_tag);
  ASSERT_TRUE(launch_with_contract(launcher, io, kPtrs, std::nullopt, stream).is_ok());
  const auto& l = launcher.launches.at(0);
  EXPECT_EQ(l.dims.grid, (std::array<unsigned, 3>{8, 2, 1}));
  EXPECT_EQ(l.dims.block, (std::array<unsigned, 3>{256, 1, 1}));
  EXPECT_EQ(l.dims.shared_mem_bytes, 4096u);
  EXPECT_EQ(l.stream, stream);
}

TEST(KernelArgsTest, DescribesTheCTypesAKernelShouldDeclare) {
  auto args = marshal_kernel_args(contract(), kPtrs, std::nullopt);
  ASSERT_TRUE(args.is_ok()) << args.status().to_string();
  std::vector<std::string> types;
  std::vector<std::string> names;
  for (const auto& a : args->described()) {
    types.push_back(a.c_type);
    names.push_back(a.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"x", "n", "y", "alpha", "flag", "out"}));
  EXPECT_EQ(types,
            (std::vector<std::string>{"float*", "int", "float*", "float", "bool", "__half*"}));
  EXPECT_EQ(args->size(), 6u);
}

TEST(KernelArgsTest, ParameterSizesFromTheDriverWidenScalars) {
  // The kernel declares `long long n`, `double alpha` and an int-sized bool.
  auto args = marshal_kernel_args(contract(), kPtrs, std::vector<size_t>{8, 8, 8, 8, 4, 8});
  ASSERT_TRUE(args.is_ok()) << args.status().to_string();
  EXPECT_EQ(args->described()[1].c_type, "long long");
  EXPECT_EQ(args->described()[3].c_type, "double");
  EXPECT_EQ(args->described()[4].c_type, "int");
  int64_t n = 0;
  std::memcpy(&n, args->bytes(1).data(), sizeof n);
  EXPECT_EQ(n, 2048);
  double alpha = 0;
  std::memcpy(&alpha, args->bytes(3).data(), sizeof alpha);
  EXPECT_EQ(alpha, 0.5);
}

TEST(KernelArgsTest, ParameterCountMismatchNamesTheArguments) {
  auto args = marshal_kernel_args(contract(), kPtrs, std::vector<size_t>{8, 4, 8});
  ASSERT_FALSE(args.is_ok());
  EXPECT_EQ(args.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(args.status().field_path(), "io.args");
  EXPECT_NE(args.status().message().find("takes 3 parameter(s)"), std::string::npos);
  EXPECT_NE(args.status().message().find("x, n, y, alpha, flag, out"), std::string::npos);
}

TEST(KernelArgsTest, TensorPassedToAScalarParameterIsRefused) {
  auto args = marshal_kernel_args(contract(), kPtrs, std::vector<size_t>{4, 4, 8, 4, 1, 8});
  ASSERT_FALSE(args.is_ok());
  EXPECT_NE(args.status().message().find("argument 'x' (kernel parameter 0) is a tensor"),
            std::string::npos)
      << args.status().message();
}

TEST(KernelArgsTest, IntThatDoesNotFitItsParameterIsRefused) {
  Json j = Json::parse(R"({"args": [
      {"name": "out", "type": "tensor", "role": "output",
       "tensor_spec": {"shape": [4], "dtype": "int64"}},
      {"name": "big", "type": "int", "value": 10000000000}],
      "launch": {"grid": [1, 1, 1], "block": [32, 1, 1]}})");
  auto io = model::parse_io_contract(j, JsonPath("io"), kLimits);
  ASSERT_TRUE(io.is_ok()) << io.status().to_string();
  const std::vector<uint64_t> ptrs = {kOut};
  auto narrow = marshal_kernel_args(*io, ptrs, std::vector<size_t>{8, 4});
  ASSERT_FALSE(narrow.is_ok());
  EXPECT_NE(narrow.status().message().find("declare it long long"), std::string::npos);
  auto wide = marshal_kernel_args(*io, ptrs, std::vector<size_t>{8, 8});
  ASSERT_TRUE(wide.is_ok()) << wide.status().to_string();
  EXPECT_EQ(wide->described()[0].c_type, "long long*");
}

TEST(KernelArgsTest, WrongNumberOfDevicePointersIsAnInternalError) {
  const std::vector<uint64_t> two = {kX, kY};
  auto args = marshal_kernel_args(contract(), two, std::nullopt);
  ASSERT_FALSE(args.is_ok());
  EXPECT_EQ(args.status().code(), ErrorCode::kInternal);
}

TEST(KernelArgsTest, MissingBlockIsRefusedBeforeLaunching) {
  model::IOContract io = contract();
  io.launch->block.reset();
  FakeLauncher launcher({8, 4, 8, 4, 1, 8});
  Status s = launch_with_contract(launcher, io, kPtrs, std::nullopt, nullptr);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.field_path(), "io.launch");
  EXPECT_TRUE(launcher.launches.empty());
}

TEST(KernelArgsTest, LauncherFailurePropagates) {
  FakeLauncher launcher({8, 4, 8, 4, 1, 8});
  launcher.fail_with = Status(ErrorCode::kInternal, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
  Status s = launch_with_contract(launcher, contract(), kPtrs, std::nullopt, nullptr);
  EXPECT_EQ(s.message(), "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
}

TEST(KernelArgsTest, MetaArgumentsBecomeDefines) {
  Json j = Json::parse(R"({"args": [
      {"name": "out", "type": "tensor", "role": "output",
       "tensor_spec": {"shape": [4], "dtype": "float32"}},
      {"name": "BLOCK", "type": "int", "value": 128, "is_meta": true},
      {"name": "USE_FMA", "type": "bool", "value": false, "is_meta": true},
      {"name": "SCALE", "type": "float", "value": 0.25, "is_meta": true}],
      "launch": {"grid": [1], "block": [128]}})");
  auto io = model::parse_io_contract(j, JsonPath("io"), kLimits);
  ASSERT_TRUE(io.is_ok()) << io.status().to_string();
  EXPECT_EQ(meta_defines(*io),
            (std::vector<std::string>{"-DBLOCK=128", "-DUSE_FMA=0", "-DSCALE=0.25"}));
}

TEST(KernelArgsTest, PointerTypesPerDtype) {
  EXPECT_EQ(c_pointer_type(model::DType::kBFloat16), "__nv_bfloat16*");
  EXPECT_EQ(c_pointer_type(model::DType::kInt8), "signed char*");
  EXPECT_EQ(c_pointer_type(model::DType::kFloat64), "double*");
}

}  // namespace
}  // namespace kforge::cuda
