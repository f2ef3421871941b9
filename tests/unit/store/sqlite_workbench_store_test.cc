#include "kforge/store/sqlite/sqlite_workbench_store.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "kforge/common/random.h"
#include "kforge/store/sqlite/sqlite_store.h"

namespace kforge::store {
namespace {

namespace fs = std::filesystem;

class SqliteWorkbenchStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kforge-wbstore-" + random_hex(6));
    path_ = dir_ / "kforge.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  static WorkbenchSessionRecord session(const std::string& id, int64_t updated) {
    return WorkbenchSessionRecord{
        id, "", "start", "/tmp/ws/" + id, Json{{"settings", {{"min_versions", 3}}}}, 1, updated};
  }

  fs::path dir_;
  fs::path path_;
};

TEST_F(SqliteWorkbenchStoreTest, SessionsAndVersionsRoundTripAcrossReopen) {
  {
    auto store = SqliteWorkbenchStore::open({path_});
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    ASSERT_TRUE((*store)->insert_session(session("wb_a", 10)).is_ok());
    ASSERT_TRUE((*store)->insert_session(session("wb_b", 20)).is_ok());
    EXPECT_EQ((*store)->insert_session(session("wb_a", 30)).code(), ErrorCode::kAlreadyExists);
    WorkbenchSessionRecord a = session("wb_a", 40);
    a.kernel_name = "softmax";
    a.state = "evaluation";
    a.data["notes"] = {{"x", "é"}};
    ASSERT_TRUE((*store)->update_session(a).is_ok());
    EXPECT_EQ((*store)->update_session(session("wb_zz", 1)).code(), ErrorCode::kNotFound);
    ASSERT_TRUE(
        (*store)->insert_version({"wb_a", 1, "kernel/softmax_v1.py", "src1", {}, 5}).is_ok());
    ASSERT_TRUE(
        (*store)->insert_version({"wb_a", 2, "kernel/softmax_v2.py", "src2", {}, 6}).is_ok());
    EXPECT_EQ((*store)->insert_version({"wb_a", 2, "f", "other", {}, 7}).code(),
              ErrorCode::kAlreadyExists);
    EXPECT_EQ((*store)->insert_version({"wb_nope", 1, "f", "s", {}, 7}).code(),
              ErrorCode::kNotFound);
    ASSERT_TRUE((*store)
                    ->update_version_results("wb_a", 1, Json{{"validation", {{"passed", true}}}})
                    .is_ok());
    EXPECT_EQ((*store)->update_version_results("wb_a", 9, Json::object()).code(),
              ErrorCode::kNotFound);
  }
  auto store = SqliteWorkbenchStore::open({path_});
  ASSERT_TRUE(store.is_ok());
  auto a = (*store)->get_session("wb_a");
  ASSERT_TRUE(a.is_ok() && a->has_value());
  EXPECT_EQ((*a)->kernel_name, "softmax");
  EXPECT_EQ((*a)->state, "evaluation");
  EXPECT_EQ((*a)->data["notes"]["x"], "é");
  EXPECT_FALSE((*store)->get_session("wb_none").value().has_value());
  auto recent = (*store)->recent_sessions(10);
  ASSERT_TRUE(recent.is_ok());
  ASSERT_EQ(recent->size(), 2u);
  EXPECT_EQ((*recent)[0].id, "wb_a");  // updated last
  auto versions = (*store)->versions("wb_a");
  ASSERT_TRUE(versions.is_ok());
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_EQ((*versions)[0].source, "src1");
  EXPECT_EQ((*versions)[0].results["validation"]["passed"], true);
  EXPECT_EQ((*versions)[1].file, "kernel/softmax_v2.py");
}

TEST_F(SqliteWorkbenchStoreTest, ListsSessionsFilteredByStateNameAndOwnerWithACursor) {
  auto store = SqliteWorkbenchStore::open({path_});
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  auto add = [&](const std::string& id, int64_t updated, const std::string& state,
                 const std::string& owner) {
    WorkbenchSessionRecord s = session(id, updated);
    s.state = state;
    s.kernel_name = id == "wb_d" ? "gelu" : "softmax";
    if (!owner.empty()) s.data["owner"] = owner;
    ASSERT_TRUE((*store)->insert_session(s).is_ok());
  };
  add("wb_a", 10, "write", "alice");
  add("wb_b", 20, "end", "bob");
  add("wb_c", 20, "write", "alice");
  add("wb_d", 30, "evaluation", "");
  auto ids = [&](const WorkbenchSessionQuery& q) {
    std::vector<std::string> out;
    auto got = (*store)->list_sessions(q);
    EXPECT_TRUE(got.is_ok()) << got.status().to_string();
    if (got.is_ok()) {
      for (const auto& s : *got)
        out.push_back(s.id);
    }
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(ids({}), (V{"wb_d", "wb_c", "wb_b", "wb_a"}));  // updated, then id, descending
  EXPECT_EQ(ids({.states = {"write", "end"}}), (V{"wb_c", "wb_b", "wb_a"}));
  EXPECT_EQ(ids({.kernel_name = "gelu"}), (V{"wb_d"}));
  EXPECT_EQ(ids({.owner = "alice"}), (V{"wb_c", "wb_a"}));
  EXPECT_EQ(ids({.owner = ""}), (V{"wb_d"}));  // stored without an owner
  EXPECT_EQ(ids({.limit = 2}), (V{"wb_d", "wb_c"}));
  EXPECT_EQ(ids({.after_updated_ms = 20, .after_id = "wb_c", .limit = 2}), (V{"wb_b", "wb_a"}));
}

TEST_F(SqliteWorkbenchStoreTest, SharesTheJobStoresFileAndSchema) {
  auto jobs = SqliteStore::open({.path = path_});
  ASSERT_TRUE(jobs.is_ok());
  EXPECT_GE(SqliteStore::schema_version(), 2);
  auto store = SqliteWorkbenchStore::open({path_});
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  ASSERT_TRUE((*store)->insert_session(session("wb_c", 1)).is_ok());
  model::JobRecord job;
  job.id = "job1";
  job.created_ms = 1;
  EXPECT_TRUE((*jobs)->insert_job(job).is_ok());
}

}  // namespace
}  // namespace kforge::store
