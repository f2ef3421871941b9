#include "kforge/model/cuda_options.h"

#include <gtest/gtest.h>

namespace kforge::model {
namespace {

StatusOr<std::vector<std::string>> parse(const Json& options) {
  return parse_cuda_compile_options(Json{{"compile_options", options}},
                                    JsonPath("kernel.metadata"));
}

TEST(CudaOptionsTest, NoOptionsIsEmpty) {
  auto none = parse_cuda_compile_options(Json::object(), JsonPath("kernel.metadata"));
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
  auto null = parse(nullptr);
  ASSERT_TRUE(null.is_ok());
  EXPECT_TRUE(null->empty());
}

TEST(CudaOptionsTest, NormalisesAllowedOptionsInOrder) {
  auto opts = parse(Json::array({"-O3", "--use_fast_math", "-lineinfo", "-std=c++17", "-DTILE=32",
                                 "-UOLD", "--ftz=true", "--maxrregcount=64", "-Xptxas", "-v",
                                 "--fmad=false", "-D", "N=4"}));
  ASSERT_TRUE(opts.is_ok()) << opts.status().to_string();
  EXPECT_EQ(*opts, (std::vector<std::string>{"--ptxas-options=-O3", "--use_fast_math", "-lineinfo",
                                             "-std=c++17", "-DTILE=32", "-UOLD", "--ftz=true",
                                             "--maxrregcount=64", "--ptxas-options=-v",
                                             "--fmad=false", "-DN=4"}));
}

TEST(CudaOptionsTest, OneStringIsSplitOnSpaces) {
  auto opts = parse("-O2  --use_fast_math -DX=1");
  ASSERT_TRUE(opts.is_ok()) << opts.status().to_string();
  EXPECT_EQ(*opts, (std::vector<std::string>{"--ptxas-options=-O2", "--use_fast_math", "-DX=1"}));
}

TEST(CudaOptionsTest, IncludePathIsRefusedWithItsIndex) {
  auto opts = parse(Json::array({"-O3", "-I/etc"}));
  ASSERT_FALSE(opts.is_ok());
  EXPECT_EQ(opts.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(opts.status().field_path(), "kernel.metadata.compile_options[1]");
  EXPECT_NE(opts.status().message().find("kernels cannot read files"), std::string::npos);
}

TEST(CudaOptionsTest, ArchitectureIsRefused) {
  auto opts = parse(Json::array({"-arch=sm_80"}));
  ASSERT_FALSE(opts.is_ok());
  EXPECT_NE(opts.status().message().find("device's own architecture"), std::string::npos);
}

TEST(CudaOptionsTest, UnknownOptionListsTheAllowList) {
  auto opts = parse(Json::array({"--fancy"}));
  ASSERT_FALSE(opts.is_ok());
  EXPECT_NE(opts.status().message().find("'--fancy' is not an allowed NVRTC option"),
            std::string::npos);
  EXPECT_NE(opts.status().message().find("--use_fast_math"), std::string::npos);
}

TEST(CudaOptionsTest, BadValuesAreRefused) {
  for (const char* bad :
       {"-std=c++98", "--ftz=maybe", "--maxrregcount=0", "--maxrregcount=300", "--dopt=fast",
        "-Xptxas=--dont-merge-basicblocks", "-D1X=2", "-UX=1", "--pre-include=/etc/passwd"}) {
    auto opts = parse(Json::array({bad}));
    EXPECT_FALSE(opts.is_ok()) << bad;
    EXPECT_EQ(opts.status().field_path(), "kernel.metadata.compile_options[0]") << bad;
  }
}

TEST(CudaOptionsTest, WrongTypesNameTheField) {
  auto number = parse(42);
  ASSERT_FALSE(number.is_ok());
  EXPECT_EQ(number.status().field_path(), "kernel.metadata.compile_options");
  auto element = parse(Json::array({"-O3", 7}));
  ASSERT_FALSE(element.is_ok());
  EXPECT_EQ(element.status().field_path(), "kernel.metadata.compile_options[1]");
  auto control = parse(Json::array({"-DX=\n1"}));
  EXPECT_FALSE(control.is_ok());
}

TEST(CudaOptionsTest, TooManyOptionsAreRefused) {
  Json many = Json::array();
  for (int i = 0; i < 65; ++i)
    many.push_back("-DX" + std::to_string(i));
  EXPECT_FALSE(parse(many).is_ok());
}

}  // namespace
}  // namespace kforge::model
