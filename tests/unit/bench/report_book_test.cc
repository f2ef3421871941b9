#include "kforge/bench/report_book.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kforge/common/random.h"

namespace kforge::bench {
namespace {

namespace fs = std::filesystem;

class TickingClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point now() const override {
    return std::chrono::steady_clock::now();
  }
  int64_t unix_ms() const override { return ++ms_; }

 private:
  mutable int64_t ms_ = 1'800'000'000'000;
};

Json answer(const std::string& op, double speedup) {
  return Json{{"report",
               {{"device", "cpu"},
                {"sizes", {"small"}},
                {"ops",
                 {{{"op", op},
                   {"dtype", "float32"},
                   {"best", {{"kernel", "v2_tiling"}, {"speedup", speedup}}}}}}}},
              {"files", {{"summary.md", "| op |"}}}};
}

model::Principal user(const std::string& name) {
  return model::Principal{name, model::Role::kUser};
}

class BenchReportBookTest : public ::testing::Test {
 protected:
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_ = fs::temp_directory_path() / ("kforge-reports-" + random_hex(6));
  TickingClock clock_;
};

std::vector<std::string> ids(const Json& page) {
  std::vector<std::string> out;
  for (const auto& r : page["reports"])
    out.push_back(r["report_id"]);
  return out;
}

TEST_F(BenchReportBookTest, KeepsReportsPerSubmitterBoundedAndScoped) {
  auto book = BenchReportBook::open({.dir = dir_, .max_per_submitter = 2, .max_total = 4}, clock_);
  ASSERT_TRUE(book.is_ok()) << book.status().to_string();
  std::vector<std::string> alice;
  for (int i = 0; i < 3; ++i)
    alice.push_back((*book)->keep(answer("add", 1.0 + i), "alice").value());
  const std::string bob = (*book)->keep(answer("softmax", 2.0), "bob").value();

  // Alice's oldest went (two per submitter); bob never sees hers, nor she his.
  auto page = (*book)->list(user("alice"), {});
  ASSERT_TRUE(page.is_ok());
  EXPECT_EQ(ids(*page), (std::vector<std::string>{alice[2], alice[1]}));
  EXPECT_EQ((*page)["reports"][0]["ops"][0]["speedup"], 3.0);
  EXPECT_EQ((*book)->get(alice[0], user("alice")).status().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(fs::exists(dir_ / (alice[0] + ".json")));
  EXPECT_EQ((*book)->get(bob, user("alice")).status().code(), ErrorCode::kNotFound);
  auto got = (*book)->get(alice[1], user("alice"));
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ((*got)["report"]["ops"][0]["op"], "add");
  EXPECT_EQ((*got)["files"]["summary.md"], "| op |");
  const model::Principal admin{"root", model::Role::kAdmin};
  EXPECT_EQ(ids((*book)->list(admin, {}).value()),
            (std::vector<std::string>{bob, alice[2], alice[1]}));

  // Pages follow the cursor; a foreign cursor and a bad limit name their field.
  auto first = (*book)->list(admin, {.limit = 2}).value();
  EXPECT_EQ(ids(first), (std::vector<std::string>{bob, alice[2]}));
  auto second = (*book)->list(admin, {.cursor = first["next_cursor"], .limit = 2}).value();
  EXPECT_EQ(ids(second), (std::vector<std::string>{alice[1]}));
  EXPECT_TRUE(second["next_cursor"].is_null());
  EXPECT_EQ((*book)->list(admin, {.cursor = "nope"}).status().field_path(), "query.cursor");
  EXPECT_EQ((*book)->list(admin, {.limit = 0}).status().field_path(), "query.limit");
}

TEST_F(BenchReportBookTest, ReadsItsReportsBackAndSkipsStrangers) {
  std::string kept;
  {
    auto book = BenchReportBook::open({.dir = dir_}, clock_);
    ASSERT_TRUE(book.is_ok());
    kept = (*book)->keep(answer("gelu", 1.5), "").value();
  }
  std::ofstream(dir_ / "br_0123456789abcdef.json") << "{not json";
  std::ofstream(dir_ / "notes.json") << "{}";
  auto book = BenchReportBook::open({.dir = dir_}, clock_);
  ASSERT_TRUE(book.is_ok());
  auto page = (*book)->list(model::Principal{}, {});
  ASSERT_TRUE(page.is_ok());
  EXPECT_EQ(ids(*page), (std::vector<std::string>{kept}));
  EXPECT_EQ((*page)["reports"][0]["ops"][0]["best"], "v2_tiling");
  EXPECT_EQ((*book)->get("../kforge", model::Principal{}).status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace kforge::bench
