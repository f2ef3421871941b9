// CUPTI is loaded at run time: from the CUDA wheel beside the headers the build uses (no GPU
// is needed to load it and read its version).
#include "kforge/cuda/cupti_api.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace kforge::cuda {
namespace {

TEST(CuptiApiTest, LoadsTheWheelsLibraryAndConvertsResults) {
  const auto lib = std::filesystem::path(KFORGE_TEST_CUDA_INCLUDE_DIR).parent_path() / "lib";
  if (!std::filesystem::exists(lib / "libcupti.so.13")) GTEST_SKIP() << "no libcupti in " << lib;
  ::setenv("KFORGE_CUPTI_LIB", lib.c_str(), 1);  // NOLINT: set before the first load
  auto api = CuptiApi::load();
  ASSERT_TRUE(api.is_ok()) << api.status().to_string();
  EXPECT_GE((*api)->version(), static_cast<uint32_t>(CUPTI_API_VERSION));
  EXPECT_NE((*api)->library_path().find("libcupti.so.13"), std::string::npos);
  EXPECT_TRUE((*api)->check(CUPTI_SUCCESS, "x").is_ok());
  const Status denied = (*api)->check(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "cuptiActivityEnable");
  EXPECT_EQ(denied.code(), ErrorCode::kUnavailable);
  EXPECT_EQ(denied.message().rfind("cuptiActivityEnable: ", 0), 0u) << denied.message();
  EXPECT_EQ((*api)->check(CUPTI_ERROR_INVALID_PARAMETER, "x").code(), ErrorCode::kInternal);
}

}  // namespace
}  // namespace kforge::cuda
