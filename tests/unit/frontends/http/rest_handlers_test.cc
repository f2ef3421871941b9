// The REST API end to end over real sockets, against FakeJobService (a real in-memory job
// service whose jobs finish when the test says so).
#include "kforge/frontends/http/rest_handlers.h"

#include <gtest/gtest.h>

#include <boost/asio/thread_pool.hpp>

#include "fakes/fake_job_service.h"
#include "frontends/http/raw_http_client.h"
#include "frontends/http/server_harness.h"
#include "kforge/frontends/http/http_server.h"
#include "kforge/jobs/exec_result_view.h"

namespace kforge::frontends::http {
namespace {

using kforge::testing::FakeJobService;
using kforge::testing::http_call;
using kforge::testing::make_request;
using kforge::testing::RawHttpClient;
using kforge::testing::RawResponse;
using kforge::testing::ServerHarness;
using std::chrono::milliseconds;

constexpr milliseconds kWait(10000);

const char* const kTorchSource =
    "import torch\n"
    "class Model(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        return x * 2\n";

Json torch_kernel() {
  return Json{{"source_code", kTorchSource}, {"kernel_type", "torch"}};
}

Json evaluate_body(double timeout_s = 5) {
  return Json{{"kernel", torch_kernel()}, {"timeout", timeout_s}, {"num_trials", 7}};
}

Json compare_body() {
  return Json{{"ref_kernel", torch_kernel()}, {"custom_kernel", torch_kernel()}, {"atol", 1e-3}};
}

Json result_json(int n = 1) {
  return Json{{"compiled", true},
              {"correctness", true},
              {"runtime", 1.2},
              {"runtime_stats", {{"mean", 1.5}, {"median", 1.2}}},
              {"n", n}};
}

class RestHandlersTest : public ::testing::Test {
 protected:
  void start(HttpServer::Options options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    harness_ = std::make_unique<ServerHarness>(HttpServer::create(options, jobs_, pool_));
    ASSERT_TRUE(harness_->ok());
    port_ = harness_->port();
  }
  void TearDown() override {
    harness_.reset();
    pool_.join();
  }

  std::optional<RawResponse> post(const std::string& target, const Json& body) {
    return http_call(port_, "POST", target, body.dump());
  }
  std::optional<RawResponse> get(const std::string& target) {
    return http_call(port_, "GET", target);
  }

  FakeJobService jobs_;
  boost::asio::thread_pool pool_{4};
  std::unique_ptr<ServerHarness> harness_;
  uint16_t port_ = 0;
};

TEST_F(RestHandlersTest, WaitFalseAnswers202AndTheJobCanBePolled) {
  start();
  auto r = post("/evaluate?wait=false", evaluate_body());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  Json accepted = Json::parse(r->body);
  const std::string id = accepted["job_id"];
  EXPECT_EQ(accepted["status"], "submitted");  // the old server's job states
  EXPECT_EQ(accepted["state"], "queued");
  EXPECT_EQ(r->header("location"), "/job/" + id);
  EXPECT_EQ(r->header("content-type"), "application/json");
  EXPECT_FALSE(r->header("x-request-id").empty());

  auto submitted = jobs_.submitted_request(id);
  ASSERT_TRUE(submitted);
  EXPECT_EQ(submitted->kind, model::JobKind::kEvaluate);
  EXPECT_EQ(submitted->timing.max_trials, 7);
  EXPECT_DOUBLE_EQ(submitted->timeout_s, 5.0);

  auto polled = get("/job/" + id);
  ASSERT_TRUE(polled);
  EXPECT_EQ(polled->status, 200);
  EXPECT_EQ(Json::parse(polled->body)["status"], "submitted");
  EXPECT_TRUE(Json::parse(polled->body)["created_at"].is_number());  // epoch seconds

  ASSERT_TRUE(jobs_.finish(id, result_json()).is_ok());
  polled = get("/job/" + id);
  ASSERT_TRUE(polled);
  Json done = Json::parse(polled->body);
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["state"], "success");
  EXPECT_EQ(done["kernel_exec_result"]["compiled"], true);
  EXPECT_EQ(done["kernel_exec_result"]["runtime"], 1.5);  // the mean
  EXPECT_EQ(done["kernel_exec_result"]["runtime_median"], 1.2);
}

TEST_F(RestHandlersTest, WaitingRequestCompletesWhenTheJobFinishes) {
  start();
  RawHttpClient client(port_);
  ASSERT_TRUE(client.send(make_request("POST", "/compare", compare_body().dump())));
  ASSERT_TRUE(jobs_.wait_for_waiters(1, kWait));
  EXPECT_FALSE(client.read_response(milliseconds(200)));  // still waiting
  const std::string id = jobs_.job_ids().at(0);
  ASSERT_TRUE(jobs_.finish(id, result_json()).is_ok());
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  Json body = Json::parse(r->body);
  EXPECT_EQ(body["job_id"], id);
  EXPECT_EQ(body["status"], "success");
  EXPECT_EQ(body["kind"], "compare");
  EXPECT_EQ(body["kernel_exec_result"]["correctness"], true);
  EXPECT_EQ(body["ref_runtime"], jobs::zero_runtime_stats());  // the reference was not timed
  EXPECT_FALSE(body["pod_ip"].get<std::string>().empty());
  EXPECT_EQ(r->header("cache-control"), "no-cache, no-store, must-revalidate");
  EXPECT_EQ(jobs_.waiter_count(), 0u);
}

TEST_F(RestHandlersTest, AlreadyFinishedJobIsAnsweredFromTheCallback) {
  start();
  // A job kforge could not run is still an answer (200, status "error"), not an HTTP error.
  RawHttpClient client(port_);
  ASSERT_TRUE(client.send(make_request("POST", "/evaluate", evaluate_body().dump())));
  ASSERT_TRUE(jobs_.wait_for_waiters(1, kWait));
  ASSERT_TRUE(jobs_.fail(jobs_.job_ids().at(0), "no worker could start").is_ok());
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body)["status"], "error");
  EXPECT_EQ(Json::parse(r->body)["state"], "failed");
  EXPECT_EQ(Json::parse(r->body)["kernel_exec_result"], Json::object());
  EXPECT_EQ(Json::parse(r->body)["error"], "no worker could start");
}

TEST_F(RestHandlersTest, CancelEndsAQueuedJobAndAnswersTheJob) {
  start();
  auto r = post("/evaluate?wait=false", evaluate_body());
  ASSERT_TRUE(r);
  const std::string id = Json::parse(r->body)["job_id"];

  auto bad = post("/job/" + id + "/cancel", Json{{"reason", 7}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Json::parse(bad->body)["field"], "reason");

  auto cancelled = post("/job/" + id + "/cancel", Json{{"reason", "user asked"}});
  ASSERT_TRUE(cancelled);
  ASSERT_EQ(cancelled->status, 200) << cancelled->body;
  Json job = Json::parse(cancelled->body);
  EXPECT_EQ(job["state"], "cancelled");
  EXPECT_EQ(job["status"], "failed");  // the old server's job states had no "cancelled"
  EXPECT_EQ(job["error"], "user asked");

  auto again = http_call(port_, "POST", "/job/" + id + "/cancel");  // no body: fine
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(Json::parse(again->body)["state"], "cancelled");

  auto unknown = http_call(port_, "POST", "/job/0123456789abcdef/cancel");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
}

TEST_F(RestHandlersTest, LegacyRootIsCompare) {
  start();
  auto r = post("/?wait=false", compare_body());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  auto submitted = jobs_.submitted_request(Json::parse(r->body)["job_id"]);
  ASSERT_TRUE(submitted);
  EXPECT_EQ(submitted->kind, model::JobKind::kCompare);
  ASSERT_TRUE(submitted->atol.has_value());
  EXPECT_DOUBLE_EQ(*submitted->atol, 1e-3);
}

TEST_F(RestHandlersTest, MalformedCompareBodyIs400NamingTheJsonPath) {
  start();
  Json body = compare_body();
  body["custom_kernel"].erase("kernel_type");
  auto r = post("/compare", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  Json error = Json::parse(r->body);
  EXPECT_EQ(error["code"], "invalid_argument");
  EXPECT_EQ(error["field"], "custom_kernel.kernel_type");
  EXPECT_EQ(error["detail"], "custom_kernel.kernel_type: is required");

  body = compare_body();
  body["custom_kernel"]["io"] =
      Json{{"args", Json::array({Json{{"name", "x"},
                                      {"type", "tensor"},
                                      {"tensor_spec", Json{{"shape", Json::array({4, -1})}}}}})}};
  r = post("/compare", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Json::parse(r->body)["field"], "custom_kernel.io.args[0].tensor_spec.shape");
  EXPECT_TRUE(jobs_.job_ids().empty());
}

TEST_F(RestHandlersTest, InvalidJsonAndBadQueryAre400) {
  start();
  auto r = http_call(port_, "POST", "/evaluate", "{not json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Json::parse(r->body)["message"].get<std::string>().rfind("body is not valid JSON", 0),
            0u);
  r = post("/evaluate?wait=maybe", evaluate_body());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Json::parse(r->body)["field"], "query.wait");
  r = post("/evaluate", Json::array({1, 2}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(jobs_.job_ids().empty());
}

TEST_F(RestHandlersTest, SubmitErrorsMapToTheirStatus) {
  start();
  Json body = evaluate_body();
  body["device"] = "tpu:0";
  auto r = post("/evaluate", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Json::parse(r->body)["field"], "device");
  jobs_.set_submit_error(unavailable("the job queue is full (--max-queued-jobs 10)"));
  r = post("/evaluate", evaluate_body());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(Json::parse(r->body)["code"], "unavailable");
  EXPECT_EQ(r->header("retry-after"), "5");
  jobs_.set_submit_error(
      Status(ErrorCode::kResourceExhausted, "quota (--max-queued-per-client 2)"));
  r = post("/evaluate", evaluate_body());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(Json::parse(r->body)["code"], "resource_exhausted");
  EXPECT_NE(r->body.find("--max-queued-per-client"), std::string::npos);
  EXPECT_EQ(r->header("retry-after"), "5");
}

TEST_F(RestHandlersTest, JobsAreSubmittedInTheNameOfTheClient) {
  start();
  auto r = post("/evaluate?wait=false", evaluate_body());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  EXPECT_EQ(jobs_.submitted_client(jobs_.job_ids().at(0)), "peer 127.0.0.1");
}

// Issue #8 item 10: 11 of 40 jobs were created without the half-closing client getting
// their ids.
TEST_F(RestHandlersTest, HalfClosingClientsGetEveryJobId) {
  start();
  for (int i = 0; i < 40; ++i) {
    RawHttpClient client(port_);
    ASSERT_TRUE(client.send(make_request("POST", "/evaluate?wait=false", evaluate_body().dump())));
    client.shutdown_write();
    auto r = client.read_response(kWait);
    ASSERT_TRUE(r) << "job " << i << " was not acknowledged";
    EXPECT_EQ(r->status, 202);
    EXPECT_EQ(Json::parse(r->body)["job_id"], jobs_.job_ids().at(static_cast<size_t>(i)));
  }
  EXPECT_EQ(jobs_.job_ids().size(), 40u);
}

TEST_F(RestHandlersTest, UnknownJobIs404) {
  start();
  auto r = get("/job/does-not-exist");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Json::parse(r->body)["code"], "not_found");
}

TEST_F(RestHandlersTest, HealthAndStats) {
  start();
  auto r = get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body)["status"], "healthy");
  EXPECT_EQ(jobs_.health_calls(), 1);
  ASSERT_TRUE(post("/evaluate?wait=false", evaluate_body()));
  r = get("/stats");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body)["total_jobs"], 1);
  r = post("/health", Json::object());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->header("allow"), "GET");
}

TEST_F(RestHandlersTest, CleanupDeletesOldFinishedJobs) {
  start();
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(post("/evaluate?wait=false", evaluate_body()));
  auto ids = jobs_.job_ids();
  ASSERT_EQ(ids.size(), 4u);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(jobs_.finish(ids[i], result_json()).is_ok());
  ASSERT_TRUE(jobs_.age_finished_job(ids[0], std::chrono::hours(48)).is_ok());
  ASSERT_TRUE(jobs_.age_finished_job(ids[1], std::chrono::hours(2)).is_ok());
  ASSERT_TRUE(jobs_.age_finished_job(ids[2], std::chrono::minutes(10)).is_ok());

  auto r = post("/admin/cleanup-jobs", Json{{"older_than_seconds", 3 * 3600}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json::parse(r->body)["deleted"], 1);
  EXPECT_EQ(Json::parse(r->body)["status"], "cleanup_completed");
  r = http_call(port_, "POST", "/admin/cleanup-jobs?max_age_hours=1.5");
  ASSERT_TRUE(r);
  EXPECT_EQ(Json::parse(r->body)["deleted"], 1);
  EXPECT_EQ(Json::parse(r->body)["older_than_seconds"], 5400);
  r = http_call(port_, "POST", "/admin/cleanup-jobs");  // default: 300 s, as the old server
  ASSERT_TRUE(r);
  EXPECT_EQ(Json::parse(r->body)["deleted"], 1);
  EXPECT_EQ(Json::parse(r->body)["older_than_seconds"], 300);
  EXPECT_EQ(Json::parse(r->body)["status"], "cleanup_completed");
  EXPECT_EQ(jobs_.job_ids().size(), 1u);  // the queued job is never deleted
  // A tiny fraction of an hour rounds up to a second; it read 0 s and deleted every job.
  r = post("/admin/cleanup-jobs", Json{{"max_age_hours", 0.0001}});
  ASSERT_TRUE(r);
  EXPECT_EQ(Json::parse(r->body)["older_than_seconds"], 1) << r->body;

  struct Bad {
    std::string target;
    std::string body;
    std::string field;
  };
  for (const Bad& bad :
       {Bad{"/admin/cleanup-jobs?max_age_hours=abc", "", "query.max_age_hours"},
        Bad{"/admin/cleanup-jobs", R"({"max_age_hours": -1})", "max_age_hours"},
        Bad{"/admin/cleanup-jobs", R"({"max_age_hours": 0})", "max_age_hours"},
        Bad{"/admin/cleanup-jobs?max_age_hours=0", "", "query.max_age_hours"},
        Bad{"/admin/cleanup-jobs", R"({"older_than_seconds": 1.5})", "older_than_seconds"},
        Bad{"/admin/cleanup-jobs", R"({"max_age_hours": 1, "older_than_seconds": 5})",
            "older_than_seconds"},
        Bad{"/admin/cleanup-jobs", "[1]", "<root>"}}) {
    r = http_call(port_, "POST", bad.target, bad.body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << bad.body;
    EXPECT_EQ(Json::parse(r->body)["field"], bad.field) << bad.body;
  }
}

TEST_F(RestHandlersTest, FiftyConcurrentWaitingRequestsAllComplete) {
  start();
  constexpr int kClients = 50;
  std::vector<std::unique_ptr<RawHttpClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RawHttpClient>(port_));
    ASSERT_TRUE(clients.back()->send(make_request("POST", "/evaluate", evaluate_body().dump())));
  }
  ASSERT_TRUE(jobs_.wait_for_waiters(kClients, kWait)) << jobs_.waiter_count();
  auto ids = jobs_.job_ids();
  ASSERT_EQ(ids.size(), static_cast<size_t>(kClients));
  for (int i = 0; i < kClients; ++i)
    ASSERT_TRUE(jobs_.finish(ids[i], result_json(i)).is_ok());
  std::set<std::string> answered;
  for (auto& client : clients) {
    auto r = client->read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    Json body = Json::parse(r->body);
    EXPECT_EQ(body["status"], "success");
    // Each client gets its own job's result.
    const std::string id = body["job_id"];
    int n = body["kernel_exec_result"]["n"];
    EXPECT_EQ(ids.at(static_cast<size_t>(n)), id);
    answered.insert(id);
  }
  EXPECT_EQ(answered.size(), static_cast<size_t>(kClients));
  // Nothing that may block ran on the io thread.
  EXPECT_EQ(jobs_.blocking_call_threads().count(harness_->io_thread()), 0u);
}

TEST_F(RestHandlersTest, ClientDisconnectWhileWaitingUnsubscribesButKeepsTheJob) {
  start();
  {
    RawHttpClient client(port_);
    ASSERT_TRUE(client.send(make_request("POST", "/evaluate", evaluate_body().dump())));
    ASSERT_TRUE(jobs_.wait_for_waiters(1, kWait));
    client.reset();  // gone (an end of stream alone could be a half-close)
  }
  EXPECT_TRUE(jobs_.wait_for_waiters(0, kWait));
  const std::string id = jobs_.job_ids().at(0);
  auto r = get("/job/" + id);
  ASSERT_TRUE(r);
  EXPECT_EQ(Json::parse(r->body)["status"], "submitted");
  ASSERT_TRUE(jobs_.finish(id, result_json()).is_ok());
}

TEST_F(RestHandlersTest, WaitingIsBoundedByJobTimeoutPlusQueueAllowance) {
  HttpServer::Options options;
  options.rest.queue_wait_allowance = milliseconds(150);
  options.rest.limits.min_timeout_s = 0.01;  // (the default minimum is the old server's 5 s)
  start(options);
  RawHttpClient client(port_);
  auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(client.send(make_request("POST", "/evaluate", evaluate_body(0.1).dump())));
  ASSERT_TRUE(jobs_.wait_for_jobs(1, kWait));
  const std::string id = jobs_.job_ids().at(0);
  ASSERT_TRUE(jobs_.start(id).is_ok());
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(250));
  EXPECT_EQ(r->status, 202);
  Json body = Json::parse(r->body);
  EXPECT_EQ(body["job_id"], id);
  EXPECT_EQ(body["status"], "compiling");
  EXPECT_EQ(body["state"], "running");
  EXPECT_EQ(r->header("location"), "/job/" + id);
  EXPECT_TRUE(jobs_.wait_for_waiters(0, kWait));
}

TEST_F(RestHandlersTest, StopWhileWaitingAnswers202WithTheJobId) {
  start();
  RawHttpClient client(port_);
  ASSERT_TRUE(client.send(make_request("POST", "/evaluate", evaluate_body().dump())));
  ASSERT_TRUE(jobs_.wait_for_waiters(1, kWait));
  std::thread stopper([this] { EXPECT_TRUE(harness_->stop_within(std::chrono::seconds(5))); });
  auto r = client.read_response();
  stopper.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202);
  EXPECT_EQ(Json::parse(r->body)["job_id"], jobs_.job_ids().at(0));
  EXPECT_EQ(jobs_.waiter_count(), 0u);
}

TEST_F(RestHandlersTest, TokenProtectsTheApi) {
  HttpServer::Options options;
  options.token = "tok";
  start(options);
  auto r = post("/evaluate?wait=false", evaluate_body());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_TRUE(jobs_.job_ids().empty());
  r = http_call(port_, "POST", "/evaluate?wait=false", evaluate_body().dump(),
                "Authorization: Bearer tok\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202);
}

// The probes answer without the token, with a status word only; nothing else does.
TEST_F(RestHandlersTest, ProbesAnswerWithoutTheToken) {
  HttpServer::Options options;
  options.token = "tok";
  start(options);
  auto r = get("/livez");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body), (Json{{"status", "alive"}}));
  r = get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body), (Json{{"status", "ready"}}));
  jobs_.set_health_status("degraded");  // a worker failed
  r = get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(Json::parse(r->body), (Json{{"status", "not ready"}}));
  // Only GET of exactly those paths: the rest still needs the token.
  for (const char* path : {"/health", "/livez/x", "/readyz/", "/stats"}) {
    r = get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
  }
  r = post("/livez", Json::object());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
}

}  // namespace
}  // namespace kforge::frontends::http
