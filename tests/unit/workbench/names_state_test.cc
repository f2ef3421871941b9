#include <gtest/gtest.h>

#include "kforge/workbench/context_meter.h"
#include "kforge/workbench/names.h"
#include "kforge/workbench/state.h"

namespace kforge::workbench {
namespace {

TEST(KernelName, NormalisesLikeTheReferenceServer) {
  EXPECT_EQ(normalize_kernel_name("Softmax").value(), "softmax");
  EXPECT_EQ(normalize_kernel_name("vector add").value(), "vector_add");
  EXPECT_EQ(normalize_kernel_name("layer-norm").value(), "layer_norm");
}

TEST(KernelName, RefusesAnythingThatCouldLeaveTheWorkspace) {
  for (const char* bad : {"", "../etc", "a/b", "..", ".hidden", "x.py", "a\\b", "1abc", "a b/c",
                          "name\n", "naïve", "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw"}) {
    auto r = normalize_kernel_name(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().field_path(), "name");
  }
}

TEST(SessionId, FormatIsCheckedAndNewIdsAreUnique) {
  const std::string a = new_session_id();
  EXPECT_TRUE(is_session_id(a));
  EXPECT_NE(a, new_session_id());
  EXPECT_FALSE(is_session_id("wb_../../../etc"));
  EXPECT_FALSE(is_session_id("wb_0123456789ABCDEF"));
  EXPECT_FALSE(is_session_id("xx_0123456789abcdef"));
}

TEST(Gate, ToolsRunOnlyInTheirStates) {
  EXPECT_TRUE(gate(Tool::kGetOverview, State::kEnd).is_ok());
  EXPECT_TRUE(gate(Tool::kSetKernelName, State::kStart).is_ok());
  EXPECT_TRUE(gate(Tool::kWriteKernelCode, State::kWrite).is_ok());
  EXPECT_TRUE(gate(Tool::kValidateCorrectness, State::kWrite).is_ok());
  EXPECT_TRUE(gate(Tool::kValidateCorrectness, State::kEvaluation).is_ok());
  EXPECT_TRUE(gate(Tool::kGetBestKernel, State::kEvaluation).is_ok());
  EXPECT_TRUE(gate(Tool::kForceTransitionToWrite, State::kEnd).is_ok());
  EXPECT_FALSE(gate(Tool::kWriteKernelCode, State::kEvaluation).is_ok());
  EXPECT_FALSE(gate(Tool::kGetBestKernel, State::kWrite).is_ok());
  EXPECT_FALSE(gate(Tool::kRunTritonKernel, State::kStart).is_ok());
  EXPECT_TRUE(gate(Tool::kRunTritonKernel, State::kStart, /*stateless=*/true).is_ok());
}

TEST(Gate, TheErrorNamesTheStateTheAllowedStatesAndTheWayThere) {
  Status s = gate(Tool::kWriteKernelCode, State::kEvaluation);
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("state 'evaluation'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("runs in 'write'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("force_transition_to_write()"), std::string::npos) << s.message();

  s = gate(Tool::kValidateCorrectness, State::kStart);
  EXPECT_NE(s.message().find("set_kernel_name(name)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("stateless form"), std::string::npos) << s.message();

  s = gate(Tool::kGetBestKernel, State::kWrite);
  EXPECT_NE(s.message().find("'evaluation' or 'end'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("write_kernel_code(code)"), std::string::npos) << s.message();
}

TEST(Tools, NamesRoundTrip) {
  EXPECT_EQ(all_tools().size(), 18u);
  for (Tool t : all_tools()) {
    EXPECT_EQ(tool_from_name(tool_name(t)), t);
  }
  EXPECT_FALSE(tool_from_name("evaluate_kernel").has_value());
}

TEST(ContextMeter, FourAsciiBytesPerTokenAndOnePerOtherCharacter) {
  EXPECT_EQ(estimate_tokens(""), 0);
  EXPECT_EQ(estimate_tokens("abcd"), 1);
  EXPECT_EQ(estimate_tokens("abcde"), 2);
  EXPECT_EQ(estimate_tokens("\xea\xb0\x80\xea\xb0\x80"), 2);  // two Hangul syllables
  EXPECT_EQ(estimate_tokens(std::string(4000, 'x')), 1000);
}

}  // namespace
}  // namespace kforge::workbench
