#include "kforge/store/sqlite/sqlite_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace kforge::store {
namespace {

namespace fs = std::filesystem;
using model::JobRecord;
using model::JobState;

#define KF_ASSERT_OK(expr)                                               \
  do {                                                                   \
    const ::kforge::Status kf_test_status_ = (expr);                     \
    ASSERT_TRUE(kf_test_status_.is_ok()) << kf_test_status_.to_string(); \
  } while (false)

JobRecord make_job(const std::string& id, int64_t created_ms) {
  JobRecord job;
  job.id = id;
  job.request = {{"kernel", {{"source", "__global__ void k() {}"}, {"name", "k"}}},
                 {"seed", uint64_t{18446744073709551615u}},  // exact only if stored as text
                 {"timing", {{"rse_target", 0.1}}},
                 {"note", "h\u00e9llo \u2713"}};
  job.device = "cuda";
  job.created_ms = created_ms;
  return job;
}

void expect_same_job(const JobRecord& got, const JobRecord& want) {
  EXPECT_EQ(got.id, want.id);
  EXPECT_EQ(model::to_string(got.kind), model::to_string(want.kind));
  EXPECT_EQ(model::to_string(got.state), model::to_string(want.state));
  EXPECT_EQ(got.request, want.request);
  EXPECT_EQ(got.result, want.result);
  EXPECT_EQ(got.device, want.device);
  EXPECT_EQ(got.error, want.error);
  EXPECT_EQ(got.attempts, want.attempts);
  EXPECT_EQ(got.created_ms, want.created_ms);
  EXPECT_EQ(got.started_ms, want.started_ms);
  EXPECT_EQ(got.finished_ms, want.finished_ms);
}

// Runs `sql` on a connection of its own and returns the first column of the last row.
std::string raw_sql(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  std::string last;
  auto on_row = [](void* out, int columns, char** values, char**) {
    if (columns > 0 && values[0] != nullptr) *static_cast<std::string*>(out) = values[0];
    return 0;
  };
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), on_row, &last, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  return last;
}

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::path(::testing::TempDir()) / "kforge_sqlite_XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    path_ = dir_ / "nested" / "kforge.db";  // open() creates "nested"
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<SqliteStore> open_store() {
    StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::open({.path = path_});
    EXPECT_TRUE(store.is_ok()) << store.status().to_string();
    return store.is_ok() ? std::move(store).value() : nullptr;
  }

  JobRecord must_get(SqliteStore& store, const std::string& id) {
    StatusOr<std::optional<JobRecord>> job = store.get_job(id);
    EXPECT_TRUE(job.is_ok()) << job.status().to_string();
    EXPECT_TRUE(job.is_ok() && job->has_value()) << "job " << id << " missing";
    return job.is_ok() && job->has_value() ? **job : JobRecord{};
  }

  fs::path dir_;
  fs::path path_;
};

TEST_F(SqliteStoreTest, OpenCreatesDirectoriesWalAndSchemaVersion) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(fs::exists(path_));
  EXPECT_EQ(raw_sql(path_, "PRAGMA journal_mode"), "wal");
  EXPECT_GE(SqliteStore::schema_version(), 1);
  EXPECT_EQ(raw_sql(path_, "PRAGMA user_version"), std::to_string(SqliteStore::schema_version()));
}

// Issue #8 item 10: with synchronous=NORMAL an acknowledged job could be lost on power loss.
// FULL is the default (every commit is fsynced before insert_job returns); NORMAL only when
// asked for.
TEST_F(SqliteStoreTest, CommitsAreFsyncedUnlessNormalIsAskedFor) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->synchronous(), SqliteStore::Synchronous::kFull);
  store.reset();
  auto normal =
      SqliteStore::open({.path = path_, .synchronous = SqliteStore::Synchronous::kNormal});
  ASSERT_TRUE(normal.is_ok()) << normal.status().to_string();
  EXPECT_EQ(*(*normal)->synchronous(), SqliteStore::Synchronous::kNormal);
}

TEST_F(SqliteStoreTest, OpenRefusesNewerSchemaAndUnopenablePaths) {
  ASSERT_NE(open_store(), nullptr);
  raw_sql(path_, "PRAGMA user_version = 999");
  StatusOr<std::unique_ptr<SqliteStore>> newer = SqliteStore::open({.path = path_});
  ASSERT_FALSE(newer.is_ok());
  EXPECT_EQ(newer.status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(newer.status().message().find("999"), std::string::npos);

  StatusOr<std::unique_ptr<SqliteStore>> on_dir = SqliteStore::open({.path = dir_});
  ASSERT_FALSE(on_dir.is_ok());
  EXPECT_EQ(on_dir.status().code(), ErrorCode::kIo) << on_dir.status().to_string();
  EXPECT_NE(on_dir.status().message().find(dir_.string()), std::string::npos);
}

TEST_F(SqliteStoreTest, InsertAndGetRoundTripEveryField) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  JobRecord queued = make_job("queued-1", 1000);
  JobRecord full = make_job("full-1", 2000);
  full.kind = model::JobKind::kCompare;
  full.state = JobState::kFailed;
  full.result = {{"compiled", true}, {"runtime_ms", 0.123456789012345}, {"list", {1, 2, 3}}};
  full.device = "cuda:1";
  full.error = "worker crashed: 'signal 9'";
  full.attempts = 3;
  full.started_ms = 2500;
  full.finished_ms = 3000;
  KF_ASSERT_OK(store->insert_job(queued));
  KF_ASSERT_OK(store->insert_job(full));

  expect_same_job(must_get(*store, "queued-1"), queued);
  expect_same_job(must_get(*store, "full-1"), full);
  EXPECT_TRUE(must_get(*store, "queued-1").result.is_null());
  StatusOr<std::optional<JobRecord>> unknown = store->get_job("nope");
  ASSERT_TRUE(unknown.is_ok());
  EXPECT_FALSE(unknown->has_value());
}

TEST_F(SqliteStoreTest, DuplicateIdIsAlreadyExistsAndKeepsTheFirst) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  KF_ASSERT_OK(store->insert_job(make_job("dup", 1)));
  JobRecord second = make_job("dup", 2);
  second.device = "cpu";
  Status status = store->insert_job(second);
  EXPECT_EQ(status.code(), ErrorCode::kAlreadyExists) << status.to_string();
  EXPECT_NE(status.message().find("dup"), std::string::npos);
  expect_same_job(must_get(*store, "dup"), make_job("dup", 1));
  EXPECT_EQ(store->insert_job(make_job("", 1)).code(), ErrorCode::kInvalidArgument);
}

TEST_F(SqliteStoreTest, MarkRunningAndRequeue) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  KF_ASSERT_OK(store->insert_job(make_job("a", 1)));
  KF_ASSERT_OK(store->requeue("a"));  // queued stays queued
  EXPECT_EQ(must_get(*store, "a").attempts, 0);

  KF_ASSERT_OK(store->mark_running("a", "cuda:1", 50));
  JobRecord running = must_get(*store, "a");
  EXPECT_EQ(running.state, JobState::kRunning);
  EXPECT_EQ(running.device, "cuda:1");
  EXPECT_EQ(running.started_ms, 50);
  EXPECT_EQ(running.attempts, 1);
  EXPECT_EQ(store->mark_running("a", "cuda:0", 60).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(must_get(*store, "a").device, "cuda:1");

  KF_ASSERT_OK(store->requeue("a"));
  EXPECT_EQ(must_get(*store, "a").state, JobState::kQueued);
  EXPECT_EQ(must_get(*store, "a").attempts, 1);
  KF_ASSERT_OK(store->mark_running("a", "cuda:0", 70));
  EXPECT_EQ(must_get(*store, "a").attempts, 2);
  EXPECT_EQ(must_get(*store, "a").started_ms, 70);

  EXPECT_EQ(store->mark_running("ghost", "cuda:0", 1).code(), ErrorCode::kNotFound);
  EXPECT_EQ(store->requeue("ghost").code(), ErrorCode::kNotFound);
}

TEST_F(SqliteStoreTest, FinishJobRecordsResultAndRefusesOverwrites) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  KF_ASSERT_OK(store->insert_job(make_job("a", 1)));
  KF_ASSERT_OK(store->insert_job(make_job("b", 2)));
  KF_ASSERT_OK(store->mark_running("a", "cuda:0", 10));
  const Json result = {{"compiled", false}, {"compilation_error", "expected ';'"}};
  KF_ASSERT_OK(store->finish_job("a", JobState::kSucceeded, result, "", 99));
  JobRecord done = must_get(*store, "a");
  EXPECT_EQ(done.state, JobState::kSucceeded);
  EXPECT_EQ(done.result, result);
  EXPECT_EQ(done.finished_ms, 99);
  EXPECT_EQ(done.attempts, 1);

  // A terminal job is never overwritten, whatever the call.
  Status again = store->finish_job("a", JobState::kFailed, Json(), "late", 100);
  EXPECT_EQ(again.code(), ErrorCode::kFailedPrecondition) << again.to_string();
  EXPECT_EQ(store->mark_running("a", "cuda:0", 101).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(store->requeue("a").code(), ErrorCode::kFailedPrecondition);
  expect_same_job(must_get(*store, "a"), done);

  // queued -> success is not a transition; queued -> cancelled is.
  EXPECT_EQ(store->finish_job("b", JobState::kSucceeded, result, "", 5).code(),
            ErrorCode::kFailedPrecondition);
  EXPECT_EQ(store->finish_job("b", JobState::kRunning, Json(), "", 5).code(),
            ErrorCode::kInvalidArgument);
  KF_ASSERT_OK(store->finish_job("b", JobState::kCancelled, Json(), "by client", 6));
  JobRecord cancelled = must_get(*store, "b");
  EXPECT_EQ(cancelled.state, JobState::kCancelled);
  EXPECT_TRUE(cancelled.result.is_null());
  EXPECT_EQ(cancelled.error, "by client");
  EXPECT_EQ(store->finish_job("ghost", JobState::kFailed, Json(), "", 1).code(),
            ErrorCode::kNotFound);
}

TEST_F(SqliteStoreTest, UnfinishedJobsAreOldestFirst) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  for (auto [id, created] : std::vector<std::pair<std::string, int64_t>>{
           {"c", 300}, {"a", 100}, {"b", 200}, {"d", 200}, {"old-done", 50}}) {
    KF_ASSERT_OK(store->insert_job(make_job(id, created)));
  }
  KF_ASSERT_OK(store->mark_running("b", "cuda:3", 400));
  KF_ASSERT_OK(store->finish_job("old-done", JobState::kFailed, Json(), "x", 60));

  StatusOr<std::vector<JobRecord>> unfinished = store->unfinished_jobs();
  ASSERT_TRUE(unfinished.is_ok()) << unfinished.status().to_string();
  std::vector<std::string> ids;
  for (const JobRecord& job : *unfinished)
    ids.push_back(job.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "d", "c"}));  // b, d tie: insertion order
  ASSERT_EQ(unfinished->size(), 4u);
  expect_same_job((*unfinished)[1], must_get(*store, "b"));
  EXPECT_EQ((*unfinished)[1].state, JobState::kRunning);
  EXPECT_EQ((*unfinished)[1].device, "cuda:3");
}

TEST_F(SqliteStoreTest, DeleteFinishedBeforeDeletesOnlyOldTerminalJobs) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  auto add_finished = [&](const std::string& id, JobState state, int64_t finished_ms) {
    KF_ASSERT_OK(store->insert_job(make_job(id, 1)));
    KF_ASSERT_OK(store->mark_running(id, "cuda:0", 2));
    KF_ASSERT_OK(store->finish_job(id, state, Json(), "", finished_ms));
  };
  add_finished("old-success", JobState::kSucceeded, 100);
  add_finished("old-failed", JobState::kFailed, 150);
  add_finished("old-cancelled", JobState::kCancelled, 200);
  add_finished("at-cutoff", JobState::kSucceeded, 500);
  add_finished("new-success", JobState::kSucceeded, 1000);
  KF_ASSERT_OK(store->insert_job(make_job("queued", 1)));  // finished_ms 0, but not finished
  KF_ASSERT_OK(store->insert_job(make_job("running", 1)));
  KF_ASSERT_OK(store->mark_running("running", "cuda:0", 2));

  StatusOr<int64_t> deleted = store->delete_finished_before(500);
  ASSERT_TRUE(deleted.is_ok()) << deleted.status().to_string();
  EXPECT_EQ(*deleted, 3);
  for (const char* gone : {"old-success", "old-failed", "old-cancelled"}) {
    StatusOr<std::optional<JobRecord>> job = store->get_job(gone);
    ASSERT_TRUE(job.is_ok());
    EXPECT_FALSE(job->has_value()) << gone;
  }
  for (const char* kept : {"at-cutoff", "new-success", "queued", "running"}) {
    EXPECT_EQ(must_get(*store, kept).id, kept);
  }
  StatusOr<int64_t> none = store->delete_finished_before(500);
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(*none, 0);
}

TEST_F(SqliteStoreTest, CountByStateListsEveryState) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 6; ++i)
    KF_ASSERT_OK(store->insert_job(make_job("j" + std::to_string(i), i)));
  KF_ASSERT_OK(store->mark_running("j0", "cuda:0", 1));
  KF_ASSERT_OK(store->mark_running("j1", "cuda:0", 1));
  KF_ASSERT_OK(store->finish_job("j1", JobState::kSucceeded, Json::object(), "", 2));
  KF_ASSERT_OK(store->finish_job("j2", JobState::kCancelled, Json(), "", 2));

  StatusOr<std::map<JobState, int64_t>> counts = store->count_by_state();
  ASSERT_TRUE(counts.is_ok()) << counts.status().to_string();
  const std::map<JobState, int64_t> want = {{JobState::kQueued, 3},
                                            {JobState::kRunning, 1},
                                            {JobState::kSucceeded, 1},
                                            {JobState::kFailed, 0},
                                            {JobState::kCancelled, 1}};
  EXPECT_EQ(*counts, want);
}

TEST_F(SqliteStoreTest, ReopenFindsEverything) {
  JobRecord done;
  {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    KF_ASSERT_OK(store->insert_job(make_job("q", 1)));
    KF_ASSERT_OK(store->insert_job(make_job("r", 2)));
    KF_ASSERT_OK(store->insert_job(make_job("s", 3)));
    KF_ASSERT_OK(store->mark_running("r", "cuda:2", 5));
    KF_ASSERT_OK(store->mark_running("s", "cuda:2", 5));
    KF_ASSERT_OK(store->finish_job("s", JobState::kSucceeded, {{"ok", true}}, "", 9));
    done = must_get(*store, "s");
  }
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  expect_same_job(must_get(*store, "q"), make_job("q", 1));
  expect_same_job(must_get(*store, "s"), done);
  EXPECT_EQ(must_get(*store, "r").state, JobState::kRunning);
  EXPECT_EQ(must_get(*store, "r").attempts, 1);
  StatusOr<std::vector<JobRecord>> unfinished = store->unfinished_jobs();
  ASSERT_TRUE(unfinished.is_ok());
  EXPECT_EQ(unfinished->size(), 2u);
}

TEST_F(SqliteStoreTest, CorruptedRowsAreInternalErrorsNamingTheJob) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  KF_ASSERT_OK(store->insert_job(make_job("bad-json", 1)));
  KF_ASSERT_OK(store->insert_job(make_job("bad-state", 2)));
  raw_sql(path_, "UPDATE jobs SET request = '{\"truncated\": ' WHERE id = 'bad-json'");
  raw_sql(path_, "UPDATE jobs SET state = 'exploded' WHERE id = 'bad-state'");

  StatusOr<std::optional<JobRecord>> json = store->get_job("bad-json");
  ASSERT_FALSE(json.is_ok());
  EXPECT_EQ(json.status().code(), ErrorCode::kInternal);
  EXPECT_NE(json.status().message().find("bad-json"), std::string::npos);
  StatusOr<std::optional<JobRecord>> state = store->get_job("bad-state");
  ASSERT_FALSE(state.is_ok());
  EXPECT_NE(state.status().message().find("bad-state"), std::string::npos);
  EXPECT_EQ(store->mark_running("bad-state", "cuda:0", 1).code(), ErrorCode::kInternal);
  EXPECT_EQ(store->unfinished_jobs().status().code(), ErrorCode::kInternal);
  EXPECT_EQ(store->count_by_state().status().code(), ErrorCode::kInternal);
}

// The "kill -9 mid-batch" property: every insert that returned OK survives SIGKILL.
TEST_F(SqliteStoreTest, SigkillMidBatchKeepsEveryAcknowledgedInsert) {
  constexpr int32_t kAcknowledged = 300;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // child: insert until killed, acknowledging each insert; never returns
    close(fds[0]);
    StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::open({.path = path_});
    if (!store.is_ok()) _exit(2);
    for (int32_t i = 0;; ++i) {
      if (!(*store)->insert_job(make_job("job-" + std::to_string(i), i)).is_ok()) _exit(3);
      if (write(fds[1], &i, sizeof i) != static_cast<ssize_t>(sizeof i)) _exit(4);
    }
  }
  close(fds[1]);
  int32_t acked = 0;
  while (acked < kAcknowledged) {
    int32_t i = -1;
    ASSERT_EQ(read(fds[0], &i, sizeof i), static_cast<ssize_t>(sizeof i)) << "child died early";
    ASSERT_EQ(i, acked);
    ++acked;
  }
  ASSERT_EQ(kill(pid, SIGKILL), 0);  // the child is still inserting
  int wait_status = 0;
  ASSERT_EQ(waitpid(pid, &wait_status, 0), pid);
  close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL);
  // Not closed cleanly: the commits are still in the WAL, not checkpointed into the file.
  EXPECT_TRUE(fs::exists(path_.string() + "-wal"));

  auto store = open_store();
  ASSERT_NE(store, nullptr);
  StatusOr<std::vector<JobRecord>> found = store->unfinished_jobs();
  ASSERT_TRUE(found.is_ok()) << found.status().to_string();
  ASSERT_GE(found->size(), static_cast<size_t>(kAcknowledged));
  for (size_t i = 0; i < found->size(); ++i) {  // a prefix of the batch, nothing torn
    const std::string id = "job-" + std::to_string(i);
    expect_same_job((*found)[i], make_job(id, static_cast<int64_t>(i)));
  }
}

TEST_F(SqliteStoreTest, ConcurrentInsertsFromEightThreadsAllLand) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store, &failures, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
        if (!store->insert_job(make_job(id, i)).is_ok()) ++failures;
        StatusOr<std::optional<JobRecord>> back = store->get_job(id);
        if (!back.is_ok() || !back->has_value()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_EQ(failures.load(), 0);
  StatusOr<std::map<JobState, int64_t>> counts = store->count_by_state();
  ASSERT_TRUE(counts.is_ok());
  EXPECT_EQ(counts->at(JobState::kQueued), kThreads * kPerThread);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; i += 33) {
      EXPECT_EQ(must_get(*store, "t" + std::to_string(t) + "-" + std::to_string(i)).created_ms, i);
    }
  }
}

}  // namespace
}  // namespace kforge::store
