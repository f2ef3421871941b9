#include "kforge/frontends/mcp/workbench_tools.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "fakes/fake_job_service.h"
#include "frontends/mcp/mcp_test_support.h"
#include "kforge/common/random.h"
#include "kforge/frontends/mcp/kernel_tools.h"
#include "kforge/frontends/mcp/protocol/dispatcher.h"
#include "kforge/store/sqlite/sqlite_workbench_store.h"

namespace kforge::frontends::mcp {
namespace {

namespace fs = std::filesystem;
using testing::message_of;
using testing::RecordingChannel;
using testing::rpc_request;

class WorkbenchToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kforge-wbtools-" + random_hex(6));
    auto store = store::SqliteWorkbenchStore::open({dir_ / "kforge.db"});
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    auto knowledge = workbench::Knowledge::load();
    ASSERT_TRUE(knowledge.is_ok());
    workbench::WorkbenchOptions o;
    o.root = dir_ / "ws";
    o.device = "cpu";
    auto wb = workbench::Workbench::create(
        o, jobs_, std::shared_ptr<store::WorkbenchStore>(std::move(store).value()), *knowledge,
        threads_.executor());
    ASSERT_TRUE(wb.is_ok());
    workbench_ = std::move(wb).value();
    ASSERT_TRUE(add_kernel_tools(catalog_.tools, jobs_, threads_.executor()).is_ok());
    ASSERT_TRUE(add_workbench_tools(catalog_, *workbench_, jobs_, threads_.executor()).is_ok());
    dispatcher_ = std::make_unique<Dispatcher>(catalog_, threads_.executor());
    auto init = std::make_shared<RecordingChannel>();
    dispatcher_->handle(
        session_, message_of(rpc_request(0, "initialize", testing::initialize_params())), init);
    ASSERT_TRUE(init->response());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::shared_ptr<RecordingChannel> call(const Json& id, const std::string& tool, Json args,
                                         bool progress = false) {
    auto channel = std::make_shared<RecordingChannel>();
    Json params = {{"name", tool}, {"arguments", std::move(args)}};
    if (progress) params["_meta"] = {{"progressToken", "p"}};
    dispatcher_->handle(session_, message_of(rpc_request(id, "tools/call", params)), channel);
    return channel;
  }

  fs::path dir_;
  Catalog catalog_;
  testing::FakeJobService jobs_;
  testing::ThreadExecutor threads_;
  std::unique_ptr<workbench::Workbench> workbench_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::shared_ptr<Session> session_ = std::make_shared<Session>("mcp-1", "peer 10.0.0.7");
};

TEST_F(WorkbenchToolsTest, RegistersEveryToolAfterTheEvaluationToolsWithStrictSchemas) {
  std::vector<std::string> names;
  for (const Tool& t : catalog_.tools.tools())
    names.push_back(t.spec.name);
  ASSERT_EQ(names.size(), 5u + workbench::all_tools().size());
  EXPECT_EQ(names[5], "get_overview");
  EXPECT_EQ(names.back(), "get_best_kernel");
  for (const Tool& t : catalog_.tools.tools()) {
    if (workbench::tool_from_name(t.spec.name)) {
      EXPECT_EQ(t.spec.input_schema["additionalProperties"], false) << t.spec.name;
      EXPECT_TRUE(t.spec.input_schema["properties"].contains("session_id")) << t.spec.name;
    }
  }
  // Both argument forms of the Triton-kernel server.
  const Json& validate = catalog_.tools.find("validate_correctness")->spec.input_schema;
  for (const char* arg : {"kernel_code", "reference_code", "test_input_code", "rtol", "atol"}) {
    EXPECT_TRUE(validate["properties"].contains(arg)) << arg;
  }
  EXPECT_TRUE(
      catalog_.tools.find("run_triton_kernel")->spec.input_schema["properties"].contains("code"));
  EXPECT_TRUE(catalog_.tools.find("benchmark_kernel")->spec.long_running);
  EXPECT_FALSE(catalog_.resources.empty());
  EXPECT_NE(catalog_.prompts.find("convert_torch_op_to_triton"), nullptr);
}

TEST_F(WorkbenchToolsTest, AnswersCarryTextAndStructuredContentAndUnknownArgumentsAreRefused) {
  auto r = call(1, "get_torch_op_info", {{"op_name", "softmax"}, {"session_id", nullptr}});
  auto response = r->response();
  ASSERT_TRUE(response);
  const Json& result = (*response)["result"];
  EXPECT_FALSE(result.value("isError", false)) << result.dump();
  EXPECT_NE(result["content"][0]["text"].get<std::string>().find("torch.softmax"),
            std::string::npos);
  EXPECT_EQ(result["structuredContent"]["name"], "softmax");
  EXPECT_TRUE(result["structuredContent"]["session"]["id"].get<std::string>().starts_with("wb_"));

  auto typo = call(2, "get_torch_op_info", {{"op", "softmax"}})->response();
  ASSERT_TRUE(typo);
  EXPECT_TRUE((*typo)["result"].value("isError", false)) << typo->dump();
}

TEST_F(WorkbenchToolsTest, ExecutionReportsEachJobAndCancellingCancelsThem) {
  auto r = call(3, "run_triton_kernel",
                {{"code", "def solve(x):\n    return x\n"},
                 {"test_input_code", "sizes = [4, 8]\ndef make_inputs(n):\n    return [n]\n"}},
                /*progress=*/true);
  ASSERT_TRUE(jobs_.wait_for_jobs(2, std::chrono::seconds(5)));
  auto related = r->related(2);
  ASSERT_GE(related.size(), 2u);
  EXPECT_EQ(related[0]["method"], "notifications/progress");
  EXPECT_NE(related[0]["params"]["message"].get<std::string>().find("started"), std::string::npos);
  // The jobs count against the quota of who opened the MCP session.
  for (const auto& id : jobs_.job_ids())
    EXPECT_EQ(jobs_.submitted_client(id), "peer 10.0.0.7") << id;
  auto cancel = std::make_shared<RecordingChannel>();
  dispatcher_->handle(session_,
                      message_of(Json{{"jsonrpc", "2.0"},
                                      {"method", "notifications/cancelled"},
                                      {"params", {{"requestId", 3}}}}),
                      cancel);
  for (const auto& id : jobs_.job_ids()) {
    bool cancelled = false;
    for (int i = 0; i < 100 && !cancelled; ++i) {
      cancelled = jobs_.get(id)->state == model::JobState::kCancelled;
      if (!cancelled) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(cancelled) << id;
  }
}

}  // namespace
}  // namespace kforge::frontends::mcp
