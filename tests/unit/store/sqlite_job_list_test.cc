// SqliteStore::list_jobs: newest first, every filter, keyset continuation (model/job_query.h).
// The PostgreSQL store runs the same SQL (store/job_query_sql.h) and the same checks through
// the real binary: tests/integration/test_jobs_list.py.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kforge/store/sqlite/sqlite_store.h"

namespace kforge::store {
namespace {

namespace fs = std::filesystem;
using model::JobQuery;
using model::JobRecord;
using model::JobState;

class SqliteJobListTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::path(::testing::TempDir()) / "kforge_list_XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    auto opened = SqliteStore::open({.path = dir_ / "kforge.db"});
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    store_ = std::move(opened).value();
    // id, created_ms, state, kernel_type (compare when "c:" prefixed), device, submitter
    add("a", 100, JobState::kSucceeded, "torch", "cpu", "alice");
    add("b", 200, JobState::kFailed, "c:triton", "cuda:0", "bob");
    add("c", 200, JobState::kSucceeded, "triton", "cpu", "alice");
    add("d", 300, JobState::kQueued, "cuda", "cuda:0", "");
    add("e", 400, JobState::kSucceeded, "c:torch", "cpu", "bob");
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  void add(const std::string& id, int64_t created_ms, JobState state, std::string type,
           const std::string& device, const std::string& submitter) {
    JobRecord job;
    job.id = id;
    job.created_ms = created_ms;
    job.state = state;
    job.device = device;
    job.submitter = submitter;
    if (type.rfind("c:", 0) == 0) {
      job.kind = model::JobKind::kCompare;
      job.request = {{"ref_kernel", {{"kernel_type", "torch"}}},
                     {"custom_kernel", {{"kernel_type", type.substr(2)}}}};
    } else {
      job.request = {{"kernel", {{"kernel_type", type}}}};
    }
    ASSERT_TRUE(store_->insert_job(job).is_ok());
  }

  std::vector<std::string> ids(const JobQuery& q) {
    auto jobs = store_->list_jobs(q);
    EXPECT_TRUE(jobs.is_ok()) << jobs.status().to_string();
    std::vector<std::string> out;
    if (jobs.is_ok()) {
      for (const JobRecord& j : *jobs)
        out.push_back(j.id);
    }
    return out;
  }

  fs::path dir_;
  std::unique_ptr<SqliteStore> store_;
};

using Ids = std::vector<std::string>;

TEST_F(SqliteJobListTest, NewestFirstTiesByIdDescending) {
  EXPECT_EQ(ids({}), (Ids{"e", "d", "c", "b", "a"}));
  auto jobs = store_->list_jobs({});
  ASSERT_TRUE(jobs.is_ok());
  EXPECT_EQ((*jobs)[0].submitter, "bob");
  EXPECT_EQ((*jobs)[0].request, (Json{{"kernel", {{"kernel_type", "torch"}}}}));
  EXPECT_TRUE((*jobs)[0].result.is_null());
}

TEST_F(SqliteJobListTest, ResultsAreCutToWhatAListingShows) {
  const Json result = {{"compiled", true},
                       {"correctness", false},
                       {"runtime_stats", {{"mean", 0.5}, {"trials", 3}}},
                       {"speedup", nullptr},
                       {"stdout", std::string(1 << 20, 'x')},
                       {"metadata", {{"kernel_name", "k"}}}};
  ASSERT_TRUE(store_->finish_job("d", JobState::kCancelled, result, "", 900).is_ok());
  JobQuery q;
  q.states = {JobState::kCancelled};
  auto jobs = store_->list_jobs(q);
  ASSERT_TRUE(jobs.is_ok() && jobs->size() == 1);
  const Json& got = (*jobs)[0].result;
  EXPECT_EQ(got["compiled"], true);
  EXPECT_EQ(got["correctness"], false);
  EXPECT_EQ(got["runtime_stats"], result["runtime_stats"]);
  EXPECT_TRUE(got["speedup"].is_null());
  EXPECT_TRUE(got["error_kind"].is_null());  // absent in the result
  EXPECT_FALSE(got.contains("stdout"));
  EXPECT_FALSE(got.contains("metadata"));
  EXPECT_EQ((*jobs)[0].request["kernel"]["kernel_type"], "cuda");
}

TEST_F(SqliteJobListTest, EachFilterAndTheirConjunction) {
  JobQuery q;
  q.states = {JobState::kSucceeded};
  EXPECT_EQ(ids(q), (Ids{"e", "c", "a"}));
  q.states = {JobState::kQueued, JobState::kFailed};
  EXPECT_EQ(ids(q), (Ids{"d", "b"}));
  q = {};
  q.kernel_type = "triton";  // an evaluate's kernel and a compare's candidate
  EXPECT_EQ(ids(q), (Ids{"c", "b"}));
  q.kernel_type = "torch";  // a compare's reference does not count
  EXPECT_EQ(ids(q), (Ids{"e", "a"}));
  q = {};
  q.device = "cuda:0";
  EXPECT_EQ(ids(q), (Ids{"d", "b"}));
  q = {};
  q.submitter = "";
  EXPECT_EQ(ids(q), (Ids{"d"}));
  q.submitter = "alice";
  EXPECT_EQ(ids(q), (Ids{"c", "a"}));
  q = {};
  q.created_from_ms = 200;
  q.created_before_ms = 400;
  EXPECT_EQ(ids(q), (Ids{"d", "c", "b"}));
  q.device = "cpu";
  q.submitter = "alice";
  q.states = {JobState::kSucceeded};
  q.kernel_type = "triton";
  EXPECT_EQ(ids(q), (Ids{"c"}));
}

TEST_F(SqliteJobListTest, KeysetPagesCoverEveryJobOnceAcrossTies) {
  JobQuery q;
  q.limit = 2;
  EXPECT_EQ(ids(q), (Ids{"e", "d"}));
  q.after = model::JobKey{300, "d"};
  EXPECT_EQ(ids(q), (Ids{"c", "b"}));
  q.after = model::JobKey{200, "c"};  // inside the tie at 200
  EXPECT_EQ(ids(q), (Ids{"b", "a"}));
  q.after = model::JobKey{100, "a"};
  EXPECT_EQ(ids(q), Ids{});
  q.limit = 0;
  auto bad = store_->list_jobs(q);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().field_path(), "limit");
}

}  // namespace
}  // namespace kforge::store
