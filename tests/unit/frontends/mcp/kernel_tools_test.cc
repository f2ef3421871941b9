#include "kforge/frontends/mcp/kernel_tools.h"

#include <gtest/gtest.h>

#include "fakes/fake_job_service.h"
#include "frontends/mcp/mcp_test_support.h"
#include "kforge/frontends/mcp/kernel_tasks.h"
#include "kforge/frontends/mcp/protocol/dispatcher.h"

namespace kforge::frontends::mcp {
namespace {

using std::chrono::seconds;
using testing::message_of;
using testing::RecordingChannel;
using testing::rpc_request;

const char* kTorch =
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x): return x\n";

class KernelToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(add_kernel_tools(catalog_.tools, jobs_, threads_.executor()).is_ok());
    dispatcher_ = std::make_unique<Dispatcher>(catalog_, threads_.executor());
    auto init = std::make_shared<RecordingChannel>();
    dispatcher_->handle(
        session_, message_of(rpc_request(0, "initialize", testing::initialize_params())), init);
    ASSERT_TRUE(init->response());
  }

  std::shared_ptr<RecordingChannel> call(const Json& id, const std::string& tool, Json args,
                                         bool progress = false) {
    auto channel = std::make_shared<RecordingChannel>();
    Json params = {{"name", tool}, {"arguments", std::move(args)}};
    if (progress) params["_meta"] = {{"progressToken", "p"}};
    dispatcher_->handle(session_, message_of(rpc_request(id, "tools/call", params)), channel);
    return channel;
  }

  Json torch_args() { return Json{{"kernel_source", kTorch}, {"kernel_type", "torch"}}; }

  Catalog catalog_;
  testing::FakeJobService jobs_;
  testing::ThreadExecutor threads_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::shared_ptr<Session> session_ = std::make_shared<Session>("k");
};

TEST_F(KernelToolsTest, RegistersTheCompatibleToolsInOrder) {
  std::vector<std::string> names;
  for (const Tool& t : catalog_.tools.tools())
    names.push_back(t.spec.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"evaluate_kernel", "compare_kernels", "validate_kernel",
                                      "get_job_status", "get_server_stats"}));
  const Tool* evaluate = catalog_.tools.find("evaluate_kernel");
  for (const char* arg :
       {"kernel_source", "kernel_type", "reference_kernel_source", "reference_kernel_type",
        "io_contract", "num_trials", "num_warmup", "enable_device_metrics", "rtol", "atol",
        "timeout", "metadata", "reference_kernel_metadata"}) {
    EXPECT_TRUE(evaluate->spec.input_schema["properties"].contains(arg)) << arg;
  }
  EXPECT_TRUE(evaluate->spec.long_running);
}

TEST_F(KernelToolsTest, EvaluateSubmitsReportsProgressAndAnswersWithTheJob) {
  auto channel = call(1, "evaluate_kernel", torch_args(), /*progress=*/true);
  ASSERT_TRUE(jobs_.wait_for_waiters(1, seconds(5)));
  const std::string id = jobs_.job_ids().at(0);
  auto submitted = jobs_.submitted_request(id);
  EXPECT_EQ(submitted->timing.max_trials, 100);
  EXPECT_EQ(submitted->timing.warmup_calls, 10);
  ASSERT_TRUE(jobs_.start(id).is_ok());
  ASSERT_TRUE(jobs_.report_progress(id, "correctness", 0.5).is_ok());
  ASSERT_TRUE(jobs_
                  .finish(id, Json{{"compiled", true},
                                   {"correctness", true},
                                   {"runtime_stats", {{"median", 0.25}, {"method", "cuda_event"}}}})
                  .is_ok());
  auto r = channel->response();
  ASSERT_TRUE(r);
  const Json& result = (*r)["result"];
  EXPECT_FALSE(result.contains("isError"));
  EXPECT_EQ(result["structuredContent"]["job_id"], id);
  EXPECT_EQ(result["structuredContent"]["status"], "success");
  EXPECT_EQ(result["content"][0]["text"].get<std::string>().rfind("Correct (job " + id, 0), 0u)
      << result["content"][0];
  std::vector<double> values;
  for (const Json& m : channel->related()) {
    if (m["method"] != "notifications/progress") continue;
    values.push_back(m["params"]["progress"]);
    EXPECT_EQ(m["params"]["_meta"]["kforge/job_id"], id);
  }
  ASSERT_GE(values.size(), 3u);
  EXPECT_EQ(values.front(), 0);
  EXPECT_EQ(values.back(), 100);
  EXPECT_TRUE(std::is_sorted(values.begin(), values.end()));
  EXPECT_TRUE(jobs_.wait_for_waiters(0, seconds(5)));
}

TEST_F(KernelToolsTest, KernelFailuresAreNormalResultsWithTheReason) {
  auto channel = call(1, "evaluate_kernel", torch_args());
  ASSERT_TRUE(jobs_.wait_for_waiters(1, seconds(5)));
  const std::string id = jobs_.job_ids().at(0);
  ASSERT_TRUE(jobs_
                  .finish(id, Json{{"compiled", false},
                                   {"correctness", false},
                                   {"error_kind", "compile"},
                                   {"compilation_error", "SyntaxError: line 3"}})
                  .is_ok());
  auto r = channel->response();
  ASSERT_TRUE(r);
  // As the old tools did: a kernel failure is a result to read, not a tool error.
  EXPECT_FALSE((*r)["result"].contains("isError") && (*r)["result"]["isError"] == true);
  EXPECT_EQ((*r)["result"]["content"][0]["text"],
            "The kernel did not compile (job " + id + " on cpu) [compile]: SyntaxError: line 3");
  const Json& sc = (*r)["result"]["structuredContent"];
  EXPECT_EQ(sc["status"], "success");
  EXPECT_EQ(sc["kernel_exec_result"]["compiled"], false);
  EXPECT_EQ(sc["kernel_exec_result"]["compilation_error"], "SyntaxError: line 3");

  auto failed = call(2, "validate_kernel", torch_args());
  ASSERT_TRUE(jobs_.wait_for_jobs(2, seconds(5)));
  ASSERT_TRUE(jobs_.wait_for_waiters(1, seconds(5)));
  ASSERT_TRUE(jobs_.fail(jobs_.job_ids().at(1), "no worker could start").is_ok());
  auto answer = failed->response();
  ASSERT_TRUE(answer);
  EXPECT_FALSE((*answer)["result"].contains("isError") && (*answer)["result"]["isError"] == true);
  const Json& v = (*answer)["result"]["structuredContent"];
  EXPECT_EQ(v["status"], "error");
  EXPECT_EQ(v["error"], "no worker could start");
  EXPECT_EQ(v["validated"], false);
  EXPECT_EQ(v["compiled"], false);
}

TEST_F(KernelToolsTest, ValidateAnswersValidatedAndCompilationTime) {
  auto channel = call(1, "validate_kernel", torch_args());
  ASSERT_TRUE(jobs_.wait_for_waiters(1, seconds(5)));
  ASSERT_TRUE(jobs_
                  .finish(jobs_.job_ids().at(0), Json{{"compiled", true},
                                                      {"correctness", true},
                                                      {"compilation_time", 0.25},
                                                      {"metadata", {{"device", "cpu"}}}})
                  .is_ok());
  const Json v = (*channel->response())["result"]["structuredContent"];
  EXPECT_EQ(v["status"], "success");
  EXPECT_EQ(v["compiled"], true);
  EXPECT_EQ(v["validated"], true);
  EXPECT_EQ(v["compilation_time"], 0.25);
  EXPECT_TRUE(v["validation_error"].is_null());
  EXPECT_EQ(v["metadata"]["gpu_id"], -1);
}

TEST_F(KernelToolsTest, NullOptionalsAndTheWrappedRequestFormAreAccepted) {
  Json flat = torch_args();
  for (const char* key : {"io_contract", "metadata", "reference_kernel_source", "atol", "rtol",
                          "num_trials", "timeout", "enable_device_metrics", "device"}) {
    flat[key] = nullptr;
  }
  auto first = call(1, "evaluate_kernel", flat);
  ASSERT_TRUE(jobs_.wait_for_jobs(1, seconds(5)));
  // The later revision of the old tools: the REST body under "request".
  Json rest = {{"request",
                {{"kernel", {{"source_code", kTorch}, {"kernel_type", "torch"}, {"io", nullptr}}},
                 {"num_trials", 7},
                 {"timeout", 30}}}};
  auto second = call(2, "evaluate_kernel", rest);
  ASSERT_TRUE(jobs_.wait_for_jobs(2, seconds(5)));
  Json compare = {{"request",
                   {{"ref_kernel", {{"source_code", kTorch}, {"kernel_type", "torch"}}},
                    {"custom_kernel", {{"source_code", kTorch}, {"kernel_type", "torch"}}},
                    {"atol", 0.05}}}};
  auto third = call(3, "compare_kernels", compare);
  ASSERT_TRUE(jobs_.wait_for_jobs(3, seconds(5)));
  auto wrapped_flat = call(4, "validate_kernel", Json{{"request", torch_args()}});
  ASSERT_TRUE(jobs_.wait_for_jobs(4, seconds(5)));
  const auto ids = jobs_.job_ids();
  EXPECT_EQ(jobs_.submitted_request(ids[1])->timing.max_trials, 7);
  EXPECT_DOUBLE_EQ(jobs_.submitted_request(ids[1])->timeout_s, 30.0);
  EXPECT_EQ(jobs_.submitted_request(ids[2])->atol, 0.05);
  EXPECT_EQ(jobs_.submitted_request(ids[2])->kind, model::JobKind::kCompare);
  EXPECT_FALSE(jobs_.submitted_request(ids[3])->measure_performance);
  for (const auto& id : ids)
    ASSERT_TRUE(jobs_.finish(id, Json{{"compiled", true}, {"correctness", true}}).is_ok());
  for (const auto& c : {first, second, third, wrapped_flat}) {
    auto r = c->response();
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)["result"]["structuredContent"]["status"], "success");
  }
}

TEST_F(KernelToolsTest, CancellingTheRequestCancelsTheJob) {
  auto channel = call(7, "compare_kernels",
                      Json{{"ref_kernel_source", kTorch},
                           {"ref_kernel_type", "torch"},
                           {"custom_kernel_source", kTorch},
                           {"custom_kernel_type", "torch"}});
  ASSERT_TRUE(jobs_.wait_for_waiters(1, seconds(5)));
  const std::string id = jobs_.job_ids().at(0);
  dispatcher_->handle(
      session_,
      message_of(jsonrpc::make_notification("notifications/cancelled", Json{{"requestId", 7}})),
      nullptr);
  EXPECT_TRUE(channel->wait_abandoned());
  for (int i = 0; i < 500; ++i) {
    if (jobs_.get(id)->state == model::JobState::kCancelled) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(jobs_.get(id)->state, model::JobState::kCancelled);
  EXPECT_NE(jobs_.get(id)->error.find("notifications/cancelled"), std::string::npos);
  EXPECT_TRUE(jobs_.wait_for_waiters(0, seconds(5)));
  EXPECT_EQ(channel->response_count(), 0);
}

TEST_F(KernelToolsTest, RejectedSubmitsAreToolErrorsUnknownJobsAreNotFound) {
  jobs_.set_submit_error(invalid_argument("unknown device 'cuda:9'", "device"));
  auto r = call(1, "evaluate_kernel", torch_args())->response();
  EXPECT_EQ((*r)["result"]["isError"], true);
  EXPECT_NE((*r)["result"]["content"][0]["text"].get<std::string>().find("device: unknown device"),
            std::string::npos);
  auto missing = call(2, "get_job_status", Json{{"job_id", "nope"}})->response();
  EXPECT_FALSE((*missing)["result"].contains("isError"));
  EXPECT_EQ((*missing)["result"]["structuredContent"]["status"], "not_found");
  EXPECT_EQ((*missing)["result"]["structuredContent"]["job_id"], "nope");
  auto stats = call(3, "get_server_stats", Json::object())->response();
  EXPECT_FALSE((*stats)["result"].contains("isError"));
  const Json& s = (*stats)["result"]["structuredContent"];
  for (const char* key : {"status", "gpu_available", "gpu_count", "gpu_info", "job_stats"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  EXPECT_EQ(s["gpu_available"], false);  // the fake has only a cpu device
  auto invalid = call(4, "evaluate_kernel", Json{{"kernel_type", "torch"}})->response();
  EXPECT_EQ((*invalid)["result"]["isError"], true);  // a bad call is still a tool error
}

// On stdio (`kforge mcp`) a call that answers itself is the only receiver of its job: the
// job is process-bound (jobs::Caller), so a restart does not run it for no one. An HTTP
// session's job is not, nor is a task's, which the client polls from a later process too.
TEST_F(KernelToolsTest, TheJobOfAStdioCallThatAnswersItselfIsProcessBound) {
  auto http = call(1, "evaluate_kernel", torch_args());
  ASSERT_TRUE(jobs_.wait_for_waiters(1, seconds(5)));
  session_ = std::make_shared<Session>("", std::string(kStdioClient));
  auto init = std::make_shared<RecordingChannel>();
  dispatcher_->handle(session_,
                      message_of(rpc_request(0, "initialize", testing::initialize_params())), init);
  ASSERT_TRUE(init->response());
  auto stdio = call(2, "evaluate_kernel", torch_args());
  ASSERT_TRUE(jobs_.wait_for_waiters(2, seconds(5)));
  const std::vector<std::string> ids = jobs_.job_ids();
  EXPECT_FALSE(jobs_.get(ids.at(0))->process_bound);
  EXPECT_TRUE(jobs_.get(ids.at(1))->process_bound);
  for (const auto& id : ids)
    ASSERT_TRUE(jobs_.finish(id, Json{{"compiled", true}, {"correctness", true}}).is_ok());
  EXPECT_TRUE(http->response() && stdio->response());

  auto stateless = Session::stateless(std::string(kStdioClient), {}, "2026-07-28", Json::object(),
                                      Json::object(), std::nullopt);
  EXPECT_TRUE(job_caller(*stateless, /*answered_by_call=*/true).process_bound);
  EXPECT_FALSE(job_caller(*stateless, /*answered_by_call=*/false).process_bound);  // a task
}

}  // namespace
}  // namespace kforge::frontends::mcp
