#include "kforge/frontends/mcp/bench_tool.h"

#include <gtest/gtest.h>

#include "bench/bench_test_support.h"
#include "fakes/fake_job_service.h"
#include "frontends/mcp/mcp_test_support.h"
#include "kforge/frontends/mcp/protocol/dispatcher.h"
#include "kforge/frontends/mcp/protocol/json_schema.h"

namespace kforge::frontends::mcp {
namespace {

using std::chrono::seconds;
using testing::message_of;
using testing::RecordingChannel;
using testing::rpc_request;

class BenchToolTest : public ::testing::Test {
 protected:
  void start(bool allow_local_paths) {
    bench::BenchPolicy policy;
    policy.library = testing::kernel_library();
    policy.allow_local_paths = allow_local_paths;
    ASSERT_TRUE(add_bench_tool(catalog_.tools, jobs_, threads_.executor(), policy).is_ok());
    dispatcher_ = std::make_unique<Dispatcher>(catalog_, threads_.executor());
    auto init = std::make_shared<RecordingChannel>();
    dispatcher_->handle(
        session_, message_of(rpc_request(0, "initialize", testing::initialize_params())), init);
    ASSERT_TRUE(init->response());
  }

  std::shared_ptr<RecordingChannel> call(const Json& id, Json args) {
    auto channel = std::make_shared<RecordingChannel>();
    Json params = {{"name", "run_benchmark_suite"},
                   {"arguments", std::move(args)},
                   {"_meta", {{"progressToken", "p"}}}};
    dispatcher_->handle(session_, message_of(rpc_request(id, "tools/call", params)), channel);
    return channel;
  }

  Catalog catalog_;
  testing::FakeJobService jobs_;
  testing::ThreadExecutor threads_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::shared_ptr<Session> session_ = std::make_shared<Session>("k");
};

TEST_F(BenchToolTest, RunsTheSuiteWithProgressAndAnswersWithTheLogs) {
  start(false);
  const Tool* tool = catalog_.tools.find("run_benchmark_suite");
  ASSERT_NE(tool, nullptr);
  EXPECT_TRUE(tool->spec.long_running);
  EXPECT_FALSE(tool->spec.input_schema["properties"].contains("kernels_dir"));
  auto channel =
      call(1, Json{{"ops", "softmax"}, {"sizes", {"small"}}, {"runs", 3}, {"log_lang", "ko"}});
  for (size_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(jobs_.wait_for_jobs(i + 1, seconds(5)));
    const std::string id = jobs_.job_ids()[i];
    EXPECT_EQ(jobs_.submitted_request(id)->timing.max_trials, 3);
    ASSERT_TRUE(jobs_.finish(id, testing::timed_result(0.5 - 0.05 * double(i))).is_ok());
  }
  auto r = channel->response(seconds(10));
  ASSERT_TRUE(r);
  const Json& result = (*r)["result"];
  EXPECT_FALSE(result.contains("isError")) << result.dump();
  EXPECT_EQ(result["content"][0]["text"],
            "softmax: v4_optimized, 0.86x vs torch (4/4 correct) "
            "[cpu device: interpreter timings]");
  const Json& files = result["structuredContent"]["files"];
  EXPECT_NE(files["softmax_log.md"].get<std::string>().find("## Phase 4: 최적 커널"),
            std::string::npos);
  EXPECT_TRUE(files.contains("summary.md") && files.contains("softmax.svg"));
  EXPECT_EQ(result["structuredContent"]["report"]["runs"], 3);
  std::vector<double> progress;
  for (const Json& m : channel->related()) {
    if (m["method"] == "notifications/progress") progress.push_back(m["params"]["progress"]);
  }
  EXPECT_EQ(progress, (std::vector<double>{0, 1, 2, 3, 4, 5, 6}));
}

TEST_F(BenchToolTest, BadArgumentsAndServerPathsAreToolErrors) {
  start(false);
  auto unknown = call(1, Json{{"ops", {"conv2d"}}});
  auto r = unknown->response();
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["result"]["isError"], true);
  EXPECT_NE((*r)["result"]["content"][0]["text"].get<std::string>().find("ops: unknown op"),
            std::string::npos)
      << (*r)["result"];
  // A server does not read paths of its own machine for a client.
  auto path = call(2, Json{{"ops", "softmax"}, {"kernels_dir", "/etc"}});
  r = path->response();
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["result"]["isError"], true);
  EXPECT_TRUE(jobs_.job_ids().empty());
}

TEST_F(BenchToolTest, LocalPathsForTheStdioServerAndASchemaTheValidatorChecks) {
  start(true);
  const Tool* tool = catalog_.tools.find("run_benchmark_suite");
  EXPECT_TRUE(tool->spec.input_schema["properties"].contains("kernels_dir"));
  EXPECT_TRUE(check_supported_schema(tool->spec.input_schema).is_ok());
  EXPECT_TRUE(validate_json(tool->spec.input_schema, Json{{"ops", {"add"}}, {"runs", 2}}).is_ok());
  EXPECT_FALSE(validate_json(tool->spec.input_schema, Json{{"runs", 2}}).is_ok());
  EXPECT_FALSE(validate_json(tool->spec.input_schema, Json{{"ops", "add"}, {"runs", 0}}).is_ok());
}

TEST(BenchSummaryTest, ATinySpeedupKeepsItsSignificantDigits) {
  // The Triton interpreter against torch on the cpu device: about 0.002x, never "0.00x".
  const Json report = {{"interpreter", true},
                       {"ops",
                        {{{"op", "add"},
                          {"best",
                           {{"kernel", "v3_coalesced"},
                            {"speedup", 0.0021},
                            {"correct_versions", 4},
                            {"versions", 4}}}}}}};
  EXPECT_EQ(summarize_bench(report),
            "add: v3_coalesced, 0.0021x vs torch (4/4 correct) [cpu device: interpreter timings]");
}

TEST_F(BenchToolTest, TheSchemaOffersTheSizePresetButNoCommand) {
  start(true);
  const Json& schema = catalog_.tools.find("run_benchmark_suite")->spec.input_schema;
  EXPECT_EQ(schema["properties"]["size_preset"]["enum"], Json::array({"default", "seed"}));
  EXPECT_FALSE(schema["properties"].contains("regenerate_cmd"));
  EXPECT_TRUE(validate_json(schema, Json{{"ops", "add"}, {"size_preset", "seed"}}).is_ok());
  EXPECT_FALSE(validate_json(schema, Json{{"ops", "add"}, {"size_preset", "huge"}}).is_ok());
}

TEST(BenchRequestTest, ASizePresetIsReadAndACommandIsRefusedNamingTheField) {
  bench::BenchPolicy policy;
  policy.library = testing::kernel_library();
  auto r = bench::parse_bench_request(Json{{"ops", "add"}, {"size_preset", "seed"}}, policy);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->options.size_preset, "seed");
  r = bench::parse_bench_request(Json{{"ops", "add"}, {"size_preset", "huge"}}, policy);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().field_path(), "size_preset");
  policy.allow_local_paths = true;  // not even for a local user's `kforge mcp`
  r = bench::parse_bench_request(Json{{"ops", "add"}, {"regenerate_cmd", "rm -rf /"}}, policy);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().field_path(), "regenerate_cmd");
  EXPECT_NE(r.status().message().find("kforge bench --kernels DIR --regenerate-cmd"),
            std::string::npos);
}

TEST_F(BenchToolTest, CancellingTheCallCancelsTheJobs) {
  start(false);
  auto channel = call(9, Json{{"ops", "softmax"}, {"sizes", "small"}});
  ASSERT_TRUE(jobs_.wait_for_jobs(2, seconds(5)));
  dispatcher_->handle(
      session_,
      message_of(jsonrpc::make_notification("notifications/cancelled", Json{{"requestId", 9}})),
      nullptr);
  EXPECT_TRUE(channel->wait_abandoned());
  for (int i = 0; i < 500; ++i) {
    if (jobs_.get(jobs_.job_ids()[0])->state == model::JobState::kCancelled) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(jobs_.get(jobs_.job_ids()[0])->state, model::JobState::kCancelled);
}

}  // namespace
}  // namespace kforge::frontends::mcp
