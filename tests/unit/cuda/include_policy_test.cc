// The #include directives a `cuda` source may hold (cuda/include_policy.h): the hostile
// spellings of tests/hostile/test_jail_root.py, and what real kernels include.
#include "kforge/cuda/include_policy.h"

#include <gtest/gtest.h>

#include <string>

namespace kforge::cuda {
namespace {

std::string refusal(const std::string& source) {
  Status s = check_includes(source, "k.cu");
  if (s.is_ok()) return {};
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  return s.message();
}

TEST(IncludePolicyTest, CudaHeadersAndFilesBesideTheSourceAreAllowed) {
  EXPECT_EQ(refusal("#include <cuda_fp16.h>\n#include \"cuda_runtime.h\"\n"), "");
  EXPECT_EQ(refusal("  #  include <cooperative_groups/reduce.h>\n"), "");
  EXPECT_EQ(refusal("#include \"helpers/tile.cuh\"\n#include_next <cuda.h>\n"), "");
  EXPECT_EQ(refusal("#if __has_include(<cuda_bf16.h>)\n#endif\n#ifdef __has_include\n#endif"), "");
  // Text that only looks like a directive: a string, a comment, a raw string, a ## token.
  EXPECT_EQ(refusal("const char* s = \"#include \\\"/etc/passwd\\\"\";\n"), "");
  EXPECT_EQ(refusal("// #include \"/etc/passwd\"\n/* #include </etc/passwd> */\n"), "");
  EXPECT_EQ(refusal("auto r = R\"x(\n#include \"/etc/passwd\"\n)x\";\n"), "");
  EXPECT_EQ(refusal("#define CAT(a, b) a ## b\n%:%: include\n"), "");
}

TEST(IncludePolicyTest, AbsolutePathsAreRefusedWithTheLineAndTheDirective) {
  const std::string why = refusal("// kernel\n#include \"/etc/passwd\"\n");
  EXPECT_NE(why.find("k.cu line 2: `#include \"/etc/passwd\"` is refused: an absolute path"),
            std::string::npos)
      << why;
  EXPECT_NE(refusal("#include </etc/shadow>\n").find("an absolute path"), std::string::npos);
  EXPECT_NE(refusal("#import \"/etc/passwd\"\n").find("an absolute path"), std::string::npos);
  EXPECT_NE(refusal("#include_next </etc/passwd>\n").find("absolute"), std::string::npos);
}

TEST(IncludePolicyTest, DotDotComponentsAreRefused) {
  EXPECT_NE(refusal("#include \"../../../../etc/passwd\"\n").find("'..'"), std::string::npos);
  EXPECT_NE(refusal("#include <crt/../../../etc/passwd>\n").find("'..'"), std::string::npos);
  EXPECT_NE(refusal("#include \"a/..\"\n").find("'..'"), std::string::npos);
  EXPECT_EQ(refusal("#include \"a..b.h\"\n"), "");  // a name, not a component
}

TEST(IncludePolicyTest, DirectivesAreFoundAsThePreprocessorFindsThem) {
  // Comments, splices, digraphs and trigraphs do not hide a directive.
  EXPECT_NE(refusal("#/**/include \"/etc/passwd\"\n"), "");
  EXPECT_NE(refusal("#include /* a\n comment */ \"/etc/passwd\"\n"), "");
  const std::string spliced = refusal("x\n#inc\\\nlude \"/etc/passwd\"\n");
  EXPECT_NE(spliced.find("line 2"), std::string::npos) << spliced;
  EXPECT_NE(refusal("%:include \"/etc/passwd\"\n"), "");
  EXPECT_NE(refusal("?\?=include \"/etc/passwd\"\n"), "");
  EXPECT_NE(refusal("#include \"/etc/pa\\\nsswd\"\n"), "");
  // The line of a directive after a multi-line comment or raw string is its own.
  const std::string later = refusal("/*\n\n*/\nauto r = R\"(\n)\";\n#include </x>\n");
  EXPECT_NE(later.find("line 6"), std::string::npos) << later;
}

TEST(IncludePolicyTest, ComputedIncludesAndHasIncludeProbesAreRefused) {
  const std::string computed = refusal("#define F \"/etc/passwd\"\n#include F\n");
  EXPECT_NE(computed.find("line 2"), std::string::npos) << computed;
  EXPECT_NE(computed.find("computed include"), std::string::npos) << computed;
  EXPECT_NE(refusal("#include\n"), "");
  EXPECT_NE(refusal("#include \"unterminated\n"), "");
  EXPECT_NE(refusal("#if __has_include(\"/etc/shadow\")\n#endif\n").find("absolute"),
            std::string::npos);
  EXPECT_NE(refusal("#define H __has_include_next(</root/.bashrc>)\n"), "");
  EXPECT_NE(refusal("#if __has_include(SOME_MACRO)\n#endif\n").find("computed"), std::string::npos);
}

}  // namespace
}  // namespace kforge::cuda
