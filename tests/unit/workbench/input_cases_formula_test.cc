#include <gtest/gtest.h>

#include "kforge/workbench/input_cases.h"
#include "kforge/workbench/work_formula.h"

namespace kforge::workbench {
namespace {

TEST(InputCases, ArgsIsOneCase) {
  auto c = input_cases("x = torch.randn(10, device=DEVICE)\nargs = [x]\n");
  ASSERT_TRUE(c.is_ok());
  ASSERT_EQ(c->size(), 1u);
  EXPECT_EQ((*c)[0].index, -1);
  EXPECT_EQ((*c)[0].label, "args");
}

TEST(InputCases, SizesLiteralGivesOneCasePerSize) {
  auto c = input_cases(
      "import torch\n"
      "sizes = [1000, 1 << 12, 2**10 * 4,  # a comment\n"
      "         (64, 4096 // 2), [3, 4]]\n"
      "def make_inputs(n):\n    return [torch.randn(n)]\n");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  ASSERT_EQ(c->size(), 5u);
  EXPECT_EQ((*c)[0].label, "1000");
  EXPECT_EQ((*c)[1].label, "4096");
  EXPECT_EQ((*c)[2].label, "4096");
  EXPECT_EQ((*c)[3].label, "64x2048");
  EXPECT_EQ((*c)[4].label, "3x4");
  EXPECT_EQ((*c)[3].index, 3);
}

TEST(InputCases, OnlyAColumnZeroAssignmentCounts) {
  auto c = input_cases("def f():\n    sizes = [1, 2]\nargs = [1]\nmy_sizes = [3]\nsizes_x = 1\n");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->size(), 1u);
  auto annotated = input_cases("sizes: list[int] = [7, 8]\n");
  ASSERT_TRUE(annotated.is_ok());
  EXPECT_EQ(annotated->size(), 2u);
}

TEST(InputCases, ANonLiteralSizesIsRefusedNamingTheArgument) {
  for (const char* code :
       {"sizes = list(range(3))\n", "sizes = [n for n in (1, 2)]\n", "sizes = [1.5]\n",
        "sizes = []\n", "sizes = [1, 2\n", "sizes = [1 << 70]\n", "sizes = [N]\n"}) {
    auto c = input_cases(code);
    ASSERT_FALSE(c.is_ok()) << code;
    EXPECT_EQ(c.status().field_path(), "test_input_code") << code;
  }
  std::string many = "sizes = [";
  for (int i = 0; i < 17; ++i)
    many += std::to_string(i + 1) + ",";
  EXPECT_FALSE(input_cases(many + "]\n").is_ok());
}

TEST(WorkFormula, EvaluatesOverTensorShapes) {
  std::vector<TensorShape> t = {{{64, 32}, 2, "float16"}, {{32, 16}, 2, "float16"}};
  EXPECT_DOUBLE_EQ(
      evaluate_formula("bytes(0) + bytes(1) + numel(0) / dim(0, -1) * dim(1, -1) * esize(0)", t)
          .value(),
      (64 * 32 + 32 * 16 + 64 * 16) * 2.0);
  EXPECT_DOUBLE_EQ(evaluate_formula("2 * numel(0) * dim(1, -1)", t).value(), 2.0 * 64 * 32 * 16);
  EXPECT_DOUBLE_EQ(evaluate_formula("-(1 + 2) * 3 / 2", t).value(), -4.5);
}

TEST(WorkFormula, ErrorsNameTheProblem) {
  std::vector<TensorShape> t = {{{8}, 4, "float32"}};
  EXPECT_FALSE(evaluate_formula("bytes(1)", t).is_ok());
  EXPECT_FALSE(evaluate_formula("dim(0, 2)", t).is_ok());
  EXPECT_FALSE(evaluate_formula("numel(0) +", t).is_ok());
  EXPECT_FALSE(evaluate_formula("unknown(0)", t).is_ok());
  EXPECT_FALSE(evaluate_formula("1 / 0", t).is_ok());
  EXPECT_EQ(dtype_size("bfloat16"), 2);
  EXPECT_EQ(dtype_size("mystery"), 0);
}

}  // namespace
}  // namespace kforge::workbench
