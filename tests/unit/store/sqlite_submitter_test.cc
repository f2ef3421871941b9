// Issue #37: every job records its submitter (model/principal.h); the column comes with a
// migration, so a database of the previous schema (version 2) opens with its jobs intact.
// Version 4 adds process_bound (model/job.h) the same way.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "kforge/store/sqlite/sqlite_store.h"

namespace kforge::store {
namespace {

namespace fs = std::filesystem;

void exec_sql_v2(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error != nullptr ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

class SqliteSubmitterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::path(::testing::TempDir()) / "kforge_submitter_XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    path_ = dir_ / "kforge.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  fs::path path_;
};

TEST_F(SqliteSubmitterTest, TheSubmitterIsStoredAndReadBack) {
  auto store = SqliteStore::open({.path = path_});
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  model::JobRecord job;
  job.id = "j-alice";
  job.request = Json::object();
  job.created_ms = 1;
  job.submitter = "alice";
  ASSERT_TRUE((*store)->insert_job(job).is_ok());
  job.id = "j-anonymous";
  job.submitter = "";
  ASSERT_TRUE((*store)->insert_job(job).is_ok());
  EXPECT_EQ((*(*store)->get_job("j-alice"))->submitter, "alice");
  EXPECT_EQ((*(*store)->get_job("j-anonymous"))->submitter, "");
  auto unfinished = (*store)->unfinished_jobs();
  ASSERT_TRUE(unfinished.is_ok());
  ASSERT_EQ(unfinished->size(), 2u);
  EXPECT_EQ((*unfinished)[0].submitter, "alice");
}

// Version 4: whether only the submitting process can receive the job (model/job.h), which
// the engine reads back from unfinished_jobs() when it starts.
TEST_F(SqliteSubmitterTest, ProcessBoundIsStoredAndReadBack) {
  auto store = SqliteStore::open({.path = path_});
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  model::JobRecord job;
  job.id = "j-bound";
  job.request = Json::object();
  job.process_bound = true;
  ASSERT_TRUE((*store)->insert_job(job).is_ok());
  job.id = "j-durable";
  job.process_bound = false;
  ASSERT_TRUE((*store)->insert_job(job).is_ok());
  EXPECT_TRUE((*(*store)->get_job("j-bound"))->process_bound);
  EXPECT_FALSE((*(*store)->get_job("j-durable"))->process_bound);
  auto unfinished = (*store)->unfinished_jobs();
  ASSERT_TRUE(unfinished.is_ok());
  ASSERT_EQ(unfinished->size(), 2u);
  EXPECT_TRUE((*unfinished)[0].process_bound);
}

TEST_F(SqliteSubmitterTest, ADatabaseOfSchemaVersion2IsMigrated) {
  // The schema as version 2 left it (migrations 0 and 1 of sqlite_store.cc), with a job.
  exec_sql_v2(path_, R"sql(
    CREATE TABLE jobs (
      id TEXT PRIMARY KEY, kind TEXT NOT NULL, state TEXT NOT NULL, request TEXT NOT NULL,
      result TEXT, device TEXT NOT NULL DEFAULT '', error TEXT NOT NULL DEFAULT '',
      attempts INTEGER NOT NULL DEFAULT 0, created_ms INTEGER NOT NULL,
      started_ms INTEGER NOT NULL DEFAULT 0, finished_ms INTEGER NOT NULL DEFAULT 0) STRICT;
    CREATE INDEX jobs_by_state ON jobs(state, created_ms);
    CREATE INDEX jobs_by_finished ON jobs(finished_ms);
    CREATE TABLE workbench_sessions (id TEXT PRIMARY KEY, kernel_name TEXT NOT NULL DEFAULT '',
      state TEXT NOT NULL, workspace TEXT NOT NULL, data TEXT NOT NULL,
      created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL) STRICT;
    CREATE TABLE workbench_versions (session_id TEXT NOT NULL, version INTEGER NOT NULL,
      file TEXT NOT NULL, source TEXT NOT NULL, results TEXT NOT NULL,
      created_ms INTEGER NOT NULL, PRIMARY KEY (session_id, version)) STRICT;
    INSERT INTO jobs (id, kind, state, request, created_ms)
      VALUES ('old-job', 'evaluate', 'success', '{}', 5);
    PRAGMA user_version = 2;
  )sql");
  auto store = SqliteStore::open({.path = path_});
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EXPECT_EQ(SqliteStore::schema_version(), 5);
  auto old = (*store)->get_job("old-job");
  ASSERT_TRUE(old.is_ok() && old->has_value());
  EXPECT_EQ((*old)->submitter, "");  // seen by admins (and servers without tokens) only
  EXPECT_FALSE((*old)->process_bound);
  EXPECT_EQ((*old)->state, model::JobState::kSucceeded);
  model::JobRecord job;
  job.id = "new-job";
  job.request = Json::object();
  job.submitter = "bob";
  ASSERT_TRUE((*store)->insert_job(job).is_ok());
  EXPECT_EQ((*(*store)->get_job("new-job"))->submitter, "bob");
}

}  // namespace
}  // namespace kforge::store
