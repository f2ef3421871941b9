// Issue #37 "job privacy" over real sockets: with tokens, a client sees, reads and cancels
// only its own jobs and batches (another's answer exactly as unknown ones), /stats and /health
// show job ids to admins only, and POST /admin/cleanup-jobs is the admins'.
#include <gtest/gtest.h>

#include <boost/asio/thread_pool.hpp>

#include "fakes/fake_job_service.h"
#include "frontends/http/raw_http_client.h"
#include "frontends/http/server_harness.h"
#include "kforge/frontends/http/http_server.h"
#include "kforge/jobs/job_access.h"

namespace kforge::frontends::http {
namespace {

using kforge::testing::FakeJobService;
using kforge::testing::http_call;
using kforge::testing::RawResponse;
using kforge::testing::ServerHarness;

constexpr const char* kAlice = "alice-token-0123456789";
constexpr const char* kBob = "bob-token-0123456789ab";
constexpr const char* kOps = "ops-token-0123456789abc";

Json privacy_evaluate_body() {
  return Json{{"kernel", {{"source_code", "class Model:\n    pass\n"}, {"kernel_type", "torch"}}}};
}

class JobPrivacyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServer::Options options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.tokens = {{kAlice, {"alice", model::Role::kUser}},
                      {kBob, {"bob", model::Role::kUser}},
                      {kOps, {"ops", model::Role::kAdmin}}};
    harness_ = std::make_unique<ServerHarness>(HttpServer::create(options, jobs_, pool_));
    ASSERT_TRUE(harness_->ok());
  }
  void TearDown() override {
    harness_.reset();
    pool_.join();
  }

  std::optional<RawResponse> call(const char* token, const std::string& method,
                                  const std::string& target, const std::string& body = {}) {
    return http_call(harness_->port(), method, target, body,
                     std::string("Authorization: Bearer ") + token + "\r\n");
  }
  std::string submit_as(const char* token) {
    auto r = call(token, "POST", "/evaluate?wait=false", privacy_evaluate_body().dump());
    EXPECT_TRUE(r && r->status == 202) << (r ? r->body : "no answer");
    return r ? Json::parse(r->body).value("job_id", "") : "";
  }

  FakeJobService jobs_;
  boost::asio::thread_pool pool_{4};
  std::unique_ptr<ServerHarness> harness_;
};

TEST_F(JobPrivacyTest, JobsRecordTheirSubmitterAndOthersGetTheUnknownJobsAnswer) {
  const std::string id = submit_as(kAlice);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(jobs_.get(id)->submitter, "alice");
  auto mine = call(kAlice, "GET", "/job/" + id);
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->status, 200);

  auto theirs = call(kBob, "GET", "/job/" + id);
  auto unknown = call(kBob, "GET", "/job/job-999");
  ASSERT_TRUE(theirs && unknown);
  EXPECT_EQ(theirs->status, 404);
  // The same answer as for an id that does not exist, but for the id itself.
  Json a = Json::parse(theirs->body);
  Json b = Json::parse(unknown->body);
  EXPECT_EQ(a["error"], "no job with id '" + id + "'");
  EXPECT_EQ(b["error"], "no job with id 'job-999'");
  for (const char* key : {"error", "message", "detail"}) {
    a.erase(key);
    b.erase(key);
  }
  EXPECT_EQ(a, b);

  auto cancel = call(kBob, "POST", "/job/" + id + "/cancel", "{}");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 404);
  EXPECT_EQ(jobs_.get(id)->state, model::JobState::kQueued);  // untouched

  auto admin = call(kOps, "GET", "/job/" + id);
  ASSERT_TRUE(admin);
  EXPECT_EQ(admin->status, 200);
  ASSERT_TRUE(jobs_.finish(id, Json{{"compiled", true}}).is_ok());
  cancel = call(kAlice, "POST", "/job/" + id + "/cancel", "{}");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 200);
}

TEST_F(JobPrivacyTest, CleanupIsForAdmins) {
  auto refused = call(kAlice, "POST", "/admin/cleanup-jobs");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
  EXPECT_NE(refused->body.find("--admin-token-file"), std::string::npos);
  auto done = call(kOps, "POST", "/admin/cleanup-jobs");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, 200);
  EXPECT_EQ(Json::parse(done->body)["status"], "cleanup_completed");
}

TEST_F(JobPrivacyTest, BatchesAreTheirSubmittersToo) {
  Json body = {{"ref_kernel", privacy_evaluate_body()["kernel"]},
               {"candidates", Json::array({privacy_evaluate_body()["kernel"]})}};
  auto r = call(kAlice, "POST", "/batch?wait=false", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  const std::string batch = Json::parse(r->body)["batch_id"];
  auto mine = call(kAlice, "GET", "/batch/" + batch);
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->status, 200);
  auto theirs = call(kBob, "GET", "/batch/" + batch);
  auto unknown = call(kBob, "GET", "/batch/batch-000000000000000000000000");
  ASSERT_TRUE(theirs && unknown);
  EXPECT_EQ(theirs->status, 404);
  EXPECT_EQ(unknown->status, 404);
  auto admin = call(kOps, "GET", "/batch/" + batch);
  ASSERT_TRUE(admin);
  EXPECT_EQ(admin->status, 200);
  for (const std::string& id : jobs_.job_ids())
    EXPECT_EQ(jobs_.get(id)->submitter, "alice");
}

TEST(JobAccessTest, HideJobIdsKeepsTheShapeAndTheCounts) {
  Json stats = {{"devices",
                 {{{"name", "cpu"},
                   {"busy", true},
                   {"current_job", "3f9c"},
                   {"device_gate",
                    {{"holder", "3f9c"}, {"shared_holders", {"3f9c", "a1b2"}}, {"waiting", 1}}}}}},
                {"job_stats", {{"total_jobs", 2}}}};
  Json admin_view = stats;
  jobs::hide_job_ids(admin_view, {"ops", model::Role::kAdmin});
  EXPECT_EQ(admin_view, stats);
  for (const model::Principal& p :
       {model::Principal{}, model::Principal{"alice", model::Role::kUser}}) {
    Json view = stats;
    jobs::hide_job_ids(view, p);
    EXPECT_FALSE(view["devices"][0].contains("current_job"));
    EXPECT_EQ(view["devices"][0]["busy"], true);
    EXPECT_EQ(view["devices"][0]["device_gate"]["holder"], jobs::kHiddenJob);
    EXPECT_EQ(view["devices"][0]["device_gate"]["shared_holders"],
              Json::array({jobs::kHiddenJob, jobs::kHiddenJob}));
    EXPECT_EQ(view["devices"][0]["device_gate"]["waiting"], 1);
    EXPECT_EQ(view["job_stats"], stats["job_stats"]);
    EXPECT_EQ(view.dump().find("3f9c"), std::string::npos);
  }
}

TEST(JobAccessTest, GetAndCancelVisibleAnswerOthersJobsAsUnknown) {
  FakeJobService service;
  auto job =
      service.submit(model::JobRequest{}, jobs::Caller("peer x", {"alice", model::Role::kUser}));
  ASSERT_TRUE(job.is_ok());
  const model::Principal bob{"bob", model::Role::kUser};
  Status hidden = jobs::get_visible(service, job->id, bob).status();
  Status unknown = service.get("job-nope").status();
  EXPECT_EQ(hidden.code(), unknown.code());
  EXPECT_EQ(hidden.message(), jobs::unknown_job(job->id).message());
  EXPECT_EQ(unknown.message(), jobs::unknown_job("job-nope").message());
  EXPECT_EQ(jobs::cancel_visible(service, job->id, "no", bob).code(), ErrorCode::kNotFound);
  EXPECT_EQ(service.get(job->id)->state, model::JobState::kQueued);
  EXPECT_TRUE(jobs::get_visible(service, job->id, {"alice", model::Role::kUser}).is_ok());
  EXPECT_TRUE(jobs::get_visible(service, job->id, {}).is_ok());  // a server without tokens
  EXPECT_TRUE(
      jobs::cancel_visible(service, job->id, "mine", {"alice", model::Role::kUser}).is_ok());
  EXPECT_EQ(jobs::require_admin(bob, "POST /admin/cleanup-jobs").code(),
            ErrorCode::kPermissionDenied);
  EXPECT_TRUE(jobs::require_admin({}, "x").is_ok());
}

}  // namespace
}  // namespace kforge::frontends::http
