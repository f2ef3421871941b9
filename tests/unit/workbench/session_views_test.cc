#include "kforge/workbench/session_views.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "kforge/common/random.h"
#include "kforge/store/sqlite/sqlite_workbench_store.h"

namespace kforge::workbench {
namespace {

namespace fs = std::filesystem;

class SessionViewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = store::SqliteWorkbenchStore::open({dir_ / "kforge.db"});
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    store_ = std::move(store).value();
    auto knowledge = Knowledge::load();
    ASSERT_TRUE(knowledge.is_ok());
    knowledge_ = *knowledge;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A stored session of `owner` with one correct, benchmarked version.
  void add(const std::string& id, const std::string& owner, int64_t updated_ms) {
    Session s;
    s.id = id;
    s.kernel_name = "softmax";
    s.state = State::kEvaluation;
    s.workspace = (dir_ / id).string();
    s.settings.device = "cpu";
    s.owner = owner;
    s.created_ms = 1000;
    s.updated_ms = updated_ms;
    ASSERT_TRUE(store_->insert_session(s.record()).is_ok());
    Version v;
    v.number = 1;
    v.file = "kernel/softmax_v1.py";
    v.source = "# <b>one row per program</b>\nimport triton\n";
    v.results = Json{{"validation", {{"passed", true}, {"cases", Json::array()}}},
                     {"benchmark",
                      {{"correct", true},
                       {"speedup_geomean", 1.5},
                       {"cases",
                        {{{"label", "16x100"},
                          {"timing", {{"median_ms", 2.0}, {"std_ms", 0.1}, {"trials", 10}}}}}}}}};
    v.created_ms = 1500;
    ASSERT_TRUE(store_->insert_version(s.version_record(v)).is_ok());
  }

  fs::path dir_ = fs::temp_directory_path() / ("kforge-views-" + random_hex(6));
  std::unique_ptr<store::SqliteWorkbenchStore> store_;
  std::shared_ptr<const Knowledge> knowledge_;
};

TEST_F(SessionViewsTest, AUserListsItsOwnSessionsAndAnAdminEveryOne) {
  add("wb_a", "alice", 2000);
  add("wb_b", "bob", 3000);
  const model::Principal alice{"alice", model::Role::kUser};
  const model::Principal admin{"root", model::Role::kAdmin};
  auto mine = list_session_views(*store_, {}, alice);
  ASSERT_TRUE(mine.is_ok()) << mine.status().to_string();
  ASSERT_EQ((*mine)["sessions"].size(), 1u);
  const Json& a = (*mine)["sessions"][0];
  EXPECT_EQ(a["session_id"], "wb_a");
  EXPECT_EQ(a["owner"], "alice");
  EXPECT_EQ(a["versions"], 1);
  EXPECT_EQ(a["correct_versions"], 1);
  EXPECT_EQ(a["best_version"], 1);
  EXPECT_EQ(a["best_speedup"], 1.5);
  EXPECT_DOUBLE_EQ(a["updated_at"].get<double>(), 2.0);
  // Asking for another owner narrows to nothing; an admin pages through both.
  store::WorkbenchSessionQuery theirs;
  theirs.owner = "bob";
  EXPECT_TRUE(list_session_views(*store_, theirs, alice).value()["sessions"].empty());
  store::WorkbenchSessionQuery one;
  one.limit = 1;
  Json first = list_session_views(*store_, one, admin).value();
  EXPECT_EQ(first["sessions"][0]["session_id"], "wb_b");
  ASSERT_TRUE(first["next_cursor"].is_string());
  ASSERT_TRUE(
      decode_session_cursor(first["next_cursor"].get<std::string>(), "query.cursor", one).is_ok());
  Json second = list_session_views(*store_, one, admin).value();
  EXPECT_EQ(second["sessions"][0]["session_id"], "wb_a");
  EXPECT_TRUE(second["next_cursor"].is_null());
  EXPECT_EQ(decode_session_cursor("c1zz", "query.cursor", one).field_path(), "query.cursor");
}

TEST_F(SessionViewsTest, ASessionShowsItsVersionsAndLogOnlyToThoseWhoMaySeeIt) {
  add("wb_a", "alice", 2000);
  auto view = session_view(*store_, *knowledge_, "wb_a", {"alice", model::Role::kUser});
  ASSERT_TRUE(view.is_ok()) << view.status().to_string();
  ASSERT_EQ((*view)["versions"].size(), 1u);
  const Json& v = (*view)["versions"][0];
  EXPECT_EQ(v["correct"], true);
  EXPECT_EQ(v["best"], true);
  EXPECT_EQ(v["speedup"], 1.5);
  EXPECT_EQ(v["time_source"], "benchmark_kernel");
  EXPECT_NE((*view)["log"].get<std::string>().find("<b>one row per program</b>"),
            std::string::npos);  // the log quotes the version's comment as it is
  const Status other =
      session_view(*store_, *knowledge_, "wb_a", {"bob", model::Role::kUser}).status();
  const Status unknown =
      session_view(*store_, *knowledge_, "wb_x", {"bob", model::Role::kUser}).status();
  EXPECT_EQ(other.code(), ErrorCode::kNotFound);
  EXPECT_EQ(unknown.code(), ErrorCode::kNotFound);
  EXPECT_TRUE(session_view(*store_, *knowledge_, "wb_a", {}).is_ok());  // no tokens: everyone
}

}  // namespace
}  // namespace kforge::workbench
