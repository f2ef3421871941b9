#include "kforge/jobs/result_caps.h"

#include <gtest/gtest.h>

namespace kforge::jobs {
namespace {

TEST(ResultCapsTest, CapTextKeepsHeadAndTailAroundAMarker) {
  EXPECT_EQ(cap_text("short", 100), "short");
  const std::string text = "HEAD" + std::string(100000, 'x') + "TAIL";
  const std::string capped = cap_text(text, 1024);
  EXPECT_LE(capped.size(), 1024u);
  EXPECT_EQ(capped.substr(0, 4), "HEAD");
  EXPECT_EQ(capped.substr(capped.size() - 4), "TAIL");
  const std::string marker = "[... kforge cut ";
  const size_t at = capped.find(marker);
  ASSERT_NE(at, std::string::npos);
  // The marker says how much was cut, and that is exactly what is missing.
  const size_t cut = std::stoul(capped.substr(at + marker.size()));
  EXPECT_NE(capped.find(" of " + std::to_string(text.size()) + " bytes here"), std::string::npos);
  const size_t marker_bytes =
      capped.size() - (text.size() - cut);  // what the capped text adds to what it kept
  EXPECT_GT(marker_bytes, 0u);
  EXPECT_LT(marker_bytes, 80u);
}

TEST(ResultCapsTest, CapTextNeverSplitsAUtf8Character) {
  std::string text;
  for (int i = 0; i < 5000; ++i)
    text += "\xE2\x82\xAC";  // the euro sign, 3 bytes
  const std::string capped = cap_text(text, 1001);
  EXPECT_LE(capped.size(), 1001u);
  EXPECT_NO_THROW((void)Json(capped).dump(-1, ' ', false, Json::error_handler_t::strict));
  EXPECT_EQ(cap_text(text, 10).size() % 3, 0u);  // too small for the marker: whole characters
}

TEST(ResultCapsTest, EveryStringOfAResultIsCapped) {
  Json result = {{"compiled", true},
                 {"correctness", false},
                 {"validation_error", std::string(200000, 'v')},
                 {"warnings", Json::array({std::string(100000, 'w'), "ok"})},
                 {"checks", Json::array({{{"name", "x"}, {"message", std::string(90000, 'm')}}})},
                 {"stdout", std::string(70000, 'o')}};
  ResultLimits limits;
  limits.max_text_bytes = 4096;
  EXPECT_TRUE(cap_result(result, limits));
  EXPECT_LE(result["validation_error"].get<std::string>().size(), 4096u);
  EXPECT_LE(result["warnings"][0].get<std::string>().size(), 4096u);
  EXPECT_EQ(result["warnings"][1], "ok");
  EXPECT_LE(result["checks"][0]["message"].get<std::string>().size(), 4096u);
  EXPECT_LE(result["stdout"].get<std::string>().size(), 4096u);
  EXPECT_FALSE(result.contains("result_truncated"));  // under the document's limit
  Json small = {{"compiled", true}};
  EXPECT_FALSE(cap_result(small, limits));
}

TEST(ResultCapsTest, ALargeDocumentLosesItsLargestNonVerdictParts) {
  Json kernels = Json::array();
  for (int i = 0; i < 20000; ++i)
    kernels.push_back({{"name", "k" + std::to_string(i)}, {"duration_ms", 0.001}});
  Json result = {{"compiled", true},
                 {"correctness", true},
                 {"runtime", 1.5},
                 {"kernels", kernels},
                 {"phases_ms", {{"compile", 1.0}}},
                 {"metadata", {{"gpu_id", -1}, {"device_metrics", {{"kernels", kernels}}}}}};
  ResultLimits limits;
  limits.max_result_bytes = 64 << 10;
  EXPECT_TRUE(cap_result(result, limits));
  EXPECT_LE(result.dump().size(), limits.max_result_bytes);
  EXPECT_EQ(result["correctness"], true);
  EXPECT_EQ(result["runtime"], 1.5);
  EXPECT_EQ(result["metadata"]["gpu_id"], -1);
  EXPECT_FALSE(result.contains("kernels"));
  EXPECT_FALSE(result["metadata"].contains("device_metrics"));
  EXPECT_TRUE(result.contains("phases_ms"));  // small: kept
  ASSERT_TRUE(result.contains("result_truncated"));
  EXPECT_EQ(result["result_truncated"]["limit"], limits.max_result_bytes);
  EXPECT_NE(result["warnings"].back().get<std::string>().find("over the limit"), std::string::npos);
}

TEST(ResultCapsTest, WhenTheVerdictAloneIsLeftItIsKept) {
  Json warnings = Json::array();
  for (int i = 0; i < 5000; ++i)
    warnings.push_back(std::string(1000, 'w'));
  Json result = {{"compiled", true},
                 {"correctness", false},
                 {"validation_error", "wrong"},
                 {"warnings", warnings}};
  ResultLimits limits;
  limits.max_result_bytes = 32 << 10;
  EXPECT_TRUE(cap_result(result, limits));
  EXPECT_LE(result.dump().size(), limits.max_result_bytes);
  EXPECT_EQ(result["validation_error"], "wrong");
  EXPECT_EQ(result["correctness"], false);
  EXPECT_EQ(result["result_truncated"]["dropped"], "everything but the verdict");
  EXPECT_EQ(result["warnings"].size(), 1u);
}

}  // namespace
}  // namespace kforge::jobs
