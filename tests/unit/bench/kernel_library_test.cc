#include "kforge/bench/kernel_library.h"

#include <gtest/gtest.h>

#include <fstream>

#include "bench/bench_test_support.h"
#include "kforge/common/files.h"

namespace kforge::bench {
namespace {

using testing::kernel_library;

Json manifest_json(const std::string& op) {
  auto text = read_file(kernel_library() / op / "manifest.json");
  EXPECT_TRUE(text.is_ok());
  return *parse_json(*text);
}

TEST(KernelLibraryTest, EveryOpOfTheLibraryLoadsWithItsFourVersions) {
  const auto ops = library_ops(kernel_library());
  EXPECT_EQ(ops, (std::vector<std::string>{"add", "gelu", "layer_norm", "mha", "softmax"}));
  for (const auto& op : ops) {
    auto m = load_manifest(kernel_library() / op);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    EXPECT_EQ(m->op, op);
    EXPECT_EQ(m->sizes.at("gpu").size(), 3u);
    EXPECT_EQ(m->tolerance.size(), m->dtypes.size());
    const auto versions = load_versions(kernel_library() / op);
    ASSERT_EQ(versions.size(), 4u);
    for (const auto& v : versions) {
      EXPECT_TRUE(v.load_error.empty()) << v.origin;
      EXPECT_FALSE(v.summary_en.empty()) << v.origin;
      EXPECT_FALSE(v.summary_ko.empty()) << v.origin;
      EXPECT_NE(v.source.find("def " + m->wrapper + "("), std::string::npos) << v.origin;
    }
  }
  auto softmax = load_manifest(kernel_library() / "softmax");
  EXPECT_EQ(softmax->sizes.at("gpu").at("large").shapes.at("x"),
            (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(softmax->sizes.at("gpu").at("large").elements_moved, 2 * 4096 * 4096);
  EXPECT_FALSE(softmax->compute_bound());
  EXPECT_TRUE(load_manifest(kernel_library() / "mha")->compute_bound());
}

TEST(KernelLibraryTest, ManifestErrorsNameTheFileAndTheField) {
  struct Case {
    std::function<void(Json&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](Json& j) { j["phase1"]["bound"] = "latency"; }, "phase1.bound"},
      {[](Json& j) { j["args"][0]["type"] = "list"; }, "args[0].type"},
      {[](Json& j) { j["args"][1]["name"] = "x"; }, "args[1]"},
      {[](Json& j) { j["sizes"]["cpu"]["large"]["shapes"].erase("x"); },
       "sizes.cpu.large.shapes.x"},
      {[](Json& j) {
         j["sizes"]["gpu"]["small"]["shapes"]["x"] = {256, 0};
       },
       "sizes.gpu.small.shapes.x"},
      {[](Json& j) { j["dtypes"].push_back("int8"); }, "dtypes[3]"},
      {[](Json& j) { j["tolerance"].erase("float16"); }, "tolerance.float16"},
      {[](Json& j) { j["default_dtype"] = "float64"; }, "default_dtype"},
      {[](Json& j) { j["reference"] = "torch.softmax(x,\n dim)"; }, "reference"},
      {[](Json& j) { j["op"] = "../etc"; }, "op"},
      {[](Json& j) { j["sizes"]["gpu"]["medium"]["flops"] = -1; }, "sizes.gpu.medium.flops"},
  };
  for (const auto& c : cases) {
    Json j = manifest_json("softmax");
    c.edit(j);
    auto m = parse_manifest(j, "x/manifest.json");
    ASSERT_FALSE(m.is_ok()) << c.field;
    EXPECT_EQ(m.status().field_path(), c.field);
    EXPECT_TRUE(m.status().message().starts_with("x/manifest.json: " + c.field + ": "))
        << m.status().message();
  }
}

TEST(KernelLibraryTest, OpNamesCannotLeaveTheLibrary) {
  EXPECT_TRUE(is_op_name("layer_norm"));
  for (const char* bad : {"", "../softmax", "Softmax", "soft max", "9ops", "a/b", "."}) {
    EXPECT_FALSE(is_op_name(bad)) << bad;
  }
}

TEST(KernelLibraryTest, SummariesComeFromTheDocstring) {
  auto v = version_from_source(
      "v2_tiling",
      "\n\"\"\"v2_tiling — BLOCK_SIZE: 2048 tiles.\nko: BLOCK_SIZE: 2048 타일\n\nMore.\n\"\"\"\n",
      "inline");
  EXPECT_EQ(v.summary_en, "BLOCK_SIZE: 2048 tiles");
  EXPECT_EQ(v.summary_ko, "BLOCK_SIZE: 2048 타일");
  auto bare = version_from_source("v1_baseline", "import torch\n", "inline");
  EXPECT_TRUE(bare.load_error.empty());
  EXPECT_TRUE(bare.summary_en.empty() && bare.summary_ko.empty());
  EXPECT_EQ(version_from_source("v1_baseline", "  \n", "inline").load_error, "the source is empty");
}

TEST(KernelLibraryTest, AMissingVersionFileIsAVersionThatDidNotLoad) {
  const auto dir = std::filesystem::temp_directory_path() / "kforge-bench-missing";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "v1_baseline.py") << "\"\"\"v1_baseline — x.\"\"\"\n";
  const auto versions = load_versions(dir);
  ASSERT_EQ(versions.size(), 4u);
  EXPECT_TRUE(versions[0].load_error.empty());
  EXPECT_EQ(versions[0].summary_en, "x");
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_NE(versions[i].load_error.find(std::string(kVersionNames[i]) + ".py"), std::string::npos)
        << versions[i].load_error;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kforge::bench
