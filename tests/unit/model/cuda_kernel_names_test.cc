#include "kforge/model/cuda_kernel_names.h"

#include <gtest/gtest.h>

namespace kforge::model {
namespace {

std::vector<std::string> names(std::string_view source) {
  std::vector<std::string> out;
  for (const auto& k : find_cuda_kernels(source))
    out.push_back(k.name);
  return out;
}

TEST(CudaKernelNamesTest, FindsTheOnlyKernel) {
  auto name = single_cuda_kernel(
      "__global__ void vector_add(float* a, float* b, float* c, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) c[i] = a[i] + b[i];\n}\n");
  ASSERT_TRUE(name.is_ok()) << name.status().to_string();
  EXPECT_EQ(*name, "vector_add");
}

TEST(CudaKernelNamesTest, SkipsCommentsStringsAndDirectives) {
  const char* source = R"cu(
#include <cuda_fp16.h>
#define DECLARE(name) __global__ void name(float* x)
// __global__ void in_a_comment(float* x) {}
/* __global__ void in_a_block_comment(float* x) {} */
const char* text = "__global__ void in_a_string(float* x) {}";
const char* raw = R"x(__global__ void in_a_raw_string() {})x";
int n = 1'000'000;
extern "C" __global__ void __launch_bounds__(256, 2) real_kernel(float* x) {
  char c = '"';
  x[0] = c;
}
)cu";
  EXPECT_EQ(names(source), std::vector<std::string>{"real_kernel"});
}

TEST(CudaKernelNamesTest, QualifiesKernelsInNamespaces) {
  const char* source = R"cu(
namespace ops {
namespace detail { __device__ float twice(float v) { return 2 * v; } }
__global__ static void scale(float* x, float s) { x[threadIdx.x] *= s; }
}
namespace { __global__ void hidden(float* x) {} }
)cu";
  EXPECT_EQ(names(source), (std::vector<std::string>{"ops::scale", "hidden"}));
}

TEST(CudaKernelNamesTest, ADeclarationAndItsDefinitionAreOneKernel) {
  EXPECT_EQ(names("__global__ void k(float*);\n__global__ void k(float* x) { x[0] = 1; }\n"),
            std::vector<std::string>{"k"});
}

TEST(CudaKernelNamesTest, ExplainsWhyItCannotPick) {
  auto none = single_cuda_kernel("__device__ float f(float x) { return x; }");
  EXPECT_NE(none.status().message().find("no __global__ function"), std::string::npos);
  auto several = single_cuda_kernel("__global__ void a() {}\n__global__ void b() {}\n");
  EXPECT_NE(several.status().message().find("several __global__ functions (a, b)"),
            std::string::npos);
  auto templ =
      single_cuda_kernel("template <int N>\n__global__ void tiled(float* x) { x[N] = 0; }\n");
  ASSERT_FALSE(templ.is_ok());
  EXPECT_NE(templ.status().message().find("is a template"), std::string::npos);
  EXPECT_TRUE(
      find_cuda_kernels("template <int N>\n__global__ void tiled(float* x) {}")[0].is_template);
}

TEST(CudaKernelNamesTest, UnterminatedInputDoesNotCrash) {
  for (const char* bad : {"__global__", "__global__ void", "/* open", "\"open", "R\"x(open",
                          "namespace {", "}}}} __global__ void k(", "__global__ void k<<<("}) {
    (void)find_cuda_kernels(bad);
  }
  EXPECT_TRUE(find_cuda_kernels("/* __global__ void k() {}").empty());
  EXPECT_EQ(names("__global__ void k("), std::vector<std::string>{"k"});
}

}  // namespace
}  // namespace kforge::model
