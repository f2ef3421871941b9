// The Workbench facade on a FakeJobService: states and gating, versions and files, verdicts
// from job results, the 3-version rule, the 70 % summary, and resumption after a "restart"
// (a new Workbench on the same store). The real jobs are exercised by
// tests/integration/test_workbench.py.
#include "kforge/workbench/workbench.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <thread>

#include "fakes/fake_job_service.h"
#include "kforge/common/files.h"
#include "kforge/common/random.h"
#include "kforge/store/sqlite/sqlite_workbench_store.h"

namespace kforge::workbench {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// One worker thread running posted tasks in order.
class TaskThread {
 public:
  TaskThread() : thread_([this] { loop(); }) {}
  ~TaskThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Executor executor() {
    return [this](std::function<void()> task) {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(task));
      cv_.notify_all();
    };
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;
};

constexpr const char* kInputs = "args = [torch.randn(64, 100, device=DEVICE)]\n";
constexpr const char* kReference =
    "import torch\ndef reference(x):\n    return torch.softmax(x, -1)\n";

Json passing_result(double median_ms = 0.5) {
  return Json{{"compiled", true},
              {"correctness", true},
              {"correctness_details",
               {{"max_abs_error", 1e-7},
                {"max_rel_error", 1e-6},
                {"trials", 5},
                {"atol", 1e-4},
                {"rtol", 1e-4}}},
              {"runtime_stats", {{"median", median_ms}, {"mean", median_ms}, {"trials", 10}}},
              {"ref_runtime_stats", {{"median", 1.0}, {"mean", 1.0}, {"trials", 10}}},
              {"speedup", 1.0 / median_ms},
              {"metadata",
               {{"inputs",
                 Json::array({{{"name", "arg0"}, {"shape", {64, 100}}, {"dtype", "float32"}}})}}}};
}

Json mismatch_result() {
  return Json{{"compiled", true},
              {"correctness", false},
              {"error_kind", "mismatch"},
              {"validation_error",
               "output 'out': 6400 of 6400 elements differ\n  File "
               "\"/tmp/kforge-child1-x/candidate.py\", line 3"}};
}

class WorkbenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kforge-wb-" + random_hex(6));
    auto store = store::SqliteWorkbenchStore::open({dir_ / "kforge.db"});
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    store_ = std::shared_ptr<store::WorkbenchStore>(std::move(store).value());
    auto knowledge = Knowledge::load();
    ASSERT_TRUE(knowledge.is_ok()) << knowledge.status().to_string();
    knowledge_ = *knowledge;
    restart();
  }
  void TearDown() override {
    wb_.reset();
    fs::remove_all(dir_);
  }

  void restart() {
    WorkbenchOptions o;
    o.root = dir_ / "workbench";
    o.device = "cpu";
    auto wb = Workbench::create(o, jobs_, store_, knowledge_, tasks_.executor());
    ASSERT_TRUE(wb.is_ok()) << wb.status().to_string();
    wb_ = std::move(wb).value();
  }

  std::future<Reply> start(Tool tool, Json args, const std::string& client = "c1",
                           const model::Principal& principal = {}) {
    auto promise = std::make_shared<std::promise<Reply>>();
    auto future = promise->get_future();
    Caller caller;
    caller.client = client;
    caller.client_name = "test-agent 1.0";
    caller.principal = principal;
    wb_->call(caller, tool, std::move(args),
              [promise](Reply r) { promise->set_value(std::move(r)); });
    return future;
  }

  Reply call(Tool tool, Json args = Json::object(), const std::string& client = "c1",
             const model::Principal& principal = {}) {
    auto f = start(tool, std::move(args), client, principal);
    EXPECT_EQ(f.wait_for(10s), std::future_status::ready);
    return f.get();
  }

  // Runs an execution tool whose single job finishes with `result`.
  Reply execute(Tool tool, Json args, const Json& result) {
    const size_t before = jobs_.job_ids().size();
    auto f = start(tool, std::move(args));
    EXPECT_TRUE(jobs_.wait_for_jobs(before + 1, 10s));
    EXPECT_TRUE(jobs_.wait_for_waiters(1, 10s));
    EXPECT_TRUE(jobs_.finish(jobs_.job_ids().back(), result).is_ok());
    EXPECT_EQ(f.wait_for(10s), std::future_status::ready);
    return f.get();
  }

  static std::string state_of(const Reply& r) { return r.structured["session"]["state"]; }

  fs::path dir_;
  testing::FakeJobService jobs_;
  TaskThread tasks_;
  std::shared_ptr<store::WorkbenchStore> store_;
  std::shared_ptr<const Knowledge> knowledge_;
  std::unique_ptr<Workbench> wb_;
};

TEST_F(WorkbenchTest, AWholeSessionFromStartToEnd) {
  Reply overview = call(Tool::kGetOverview);
  ASSERT_FALSE(overview.is_error);
  EXPECT_NE(overview.text.find("## States"), std::string::npos);
  EXPECT_EQ(state_of(overview), "start");
  const std::string id = overview.structured["session"]["id"];
  const fs::path ws = overview.structured["session"]["workspace"].get<std::string>();
  EXPECT_FALSE(fs::exists(ws));  // made when the session has work in it

  Reply early = call(Tool::kWriteKernelCode, {{"code", "def solve(x): return x"}});
  EXPECT_TRUE(early.is_error);
  EXPECT_NE(early.text.find("state 'start'"), std::string::npos) << early.text;
  EXPECT_NE(early.text.find("set_kernel_name(name)"), std::string::npos) << early.text;

  EXPECT_EQ(state_of(call(Tool::kSetKernelName, {{"name", "Softmax"}})), "write");
  EXPECT_TRUE(fs::is_directory(ws / "kernel"));
  Reply v1 =
      call(Tool::kWriteKernelCode, {{"code", "import torch\ndef solve(x):\n    return x\n"}});
  ASSERT_FALSE(v1.is_error) << v1.text;
  EXPECT_EQ(state_of(v1), "evaluation");
  EXPECT_TRUE(fs::exists(ws / "kernel" / "softmax_v1.py"));
  EXPECT_NE(v1.text.find("Guidance"), std::string::npos);

  // A wrong v1: the session goes back to write; the traceback names the version's file.
  Reply wrong =
      execute(Tool::kValidateCorrectness,
              {{"reference_code", kReference}, {"test_input_code", kInputs}}, mismatch_result());
  EXPECT_TRUE(wrong.is_error);
  EXPECT_EQ(state_of(wrong), "write");
  EXPECT_NE(wrong.text.find("\"kernel/softmax_v1.py\", line 3"), std::string::npos) << wrong.text;
  const auto request = jobs_.submitted_request(jobs_.job_ids().back());
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->kind, model::JobKind::kCompare);
  EXPECT_EQ(request->device, "cpu");
  EXPECT_TRUE(fs::exists(ws / "tests" / "reference.py"));

  Reply not_yet = call(Tool::kGetBestKernel);
  EXPECT_TRUE(not_yet.is_error);
  EXPECT_NE(not_yet.text.find("not available in state 'write'"), std::string::npos);

  call(Tool::kWriteKernelCode, {{"code", "def solve(x):\n    return x  # v2\n"}});
  Reply right =
      execute(Tool::kValidateCorrectness,
              {{"reference_code", kReference}, {"test_input_code", kInputs}}, passing_result());
  EXPECT_FALSE(right.is_error) << right.text;
  EXPECT_EQ(state_of(right), "evaluation");
  Reply rule = call(Tool::kGetBestKernel);
  EXPECT_TRUE(rule.is_error);
  EXPECT_NE(rule.text.find("2 of the 3 versions"), std::string::npos) << rule.text;

  Reply bench =
      execute(Tool::kBenchmarkKernel,
              {{"reference_code", kReference}, {"test_input_code", kInputs}}, passing_result(0.25));
  EXPECT_FALSE(bench.is_error) << bench.text;
  EXPECT_NE(bench.text.find("4x"), std::string::npos) << bench.text;
  const Json roofline = bench.structured["cases"][0]["roofline"];
  EXPECT_EQ(roofline["bytes"], 2 * 64 * 100 * 4);  // softmax: 2 * bytes(0)

  EXPECT_EQ(state_of(call(Tool::kForceTransitionToWrite)), "write");
  call(Tool::kWriteKernelCode, {{"code", "def solve(x):\n    return x  # v3\n"}});
  execute(Tool::kValidateCorrectness,
          {{"reference_code", kReference}, {"test_input_code", kInputs}}, passing_result());
  Reply best = call(Tool::kGetBestKernel);
  ASSERT_FALSE(best.is_error) << best.text;
  EXPECT_EQ(state_of(best), "end");
  EXPECT_EQ(best.structured["version"], 2);  // the only timed correct version
  EXPECT_NE(best.text.find("# v2"), std::string::npos);

  // Files and logs.
  EXPECT_TRUE(fs::exists(ws / "kernel" / "softmax_v3.py"));
  const std::string md = read_file(ws / "log" / "softmax_log.md").value();
  EXPECT_NE(md.find("### v2"), std::string::npos);
  EXPECT_NE(md.find("Best so far"), std::string::npos);
  const std::string jsonl = read_file(ws / "log" / (id + ".jsonl")).value();
  // Every call, those made before the session was stored included.
  EXPECT_LT(jsonl.find("\"tool\":\"get_overview\""), jsonl.find("\"tool\":\"write_kernel_code\""));
  EXPECT_NE(jsonl.find("\"tool\":\"get_best_kernel\""), std::string::npos);
  EXPECT_NE(jsonl.find("\"state_after\":\"end\""), std::string::npos);
  // The client's own name (it was always empty), and the MCP session apart.
  EXPECT_NE(jsonl.find("\"client\":\"test-agent 1.0\""), std::string::npos);
  EXPECT_NE(jsonl.find("\"mcp_session\":\"c1\""), std::string::npos);
}

TEST_F(WorkbenchTest, ASessionSurvivesARestartAndResumesInANewContext) {
  call(Tool::kSetKernelName, {{"name", "relu"}});
  Reply v1 = call(Tool::kWriteKernelCode, {{"code", "def solve(x):\n    return x\n"}});
  const std::string id = v1.structured["session"]["id"];
  const int64_t used = v1.structured["context"]["used_tokens"];
  EXPECT_GT(used, 0);

  restart();
  // The restarted server does not know the caller: a bare call starts a new session ...
  Reply fresh = call(Tool::kGetCurrentStatus, Json::object(), "c2");
  EXPECT_NE(fresh.structured["session"]["id"], id);
  EXPECT_NE(fresh.text.find(id), std::string::npos) << "a new session lists resumable ones";
  // ... and resume_session continues the old one, with its versions and state.
  Reply resumed = call(Tool::kResumeSession, {{"session_id", id}}, "c2");
  ASSERT_FALSE(resumed.is_error) << resumed.text;
  EXPECT_EQ(state_of(resumed), "evaluation");
  EXPECT_EQ(resumed.structured["session"]["versions"], 1);
  EXPECT_EQ(resumed.structured["epoch"], 2);
  EXPECT_LT(resumed.structured["context"]["used_tokens"].get<int64_t>(), used + 5000);
  // Its summary says it was resumed; it claimed the context had passed 70 % ("0 tokens
  // estimated") at any use.
  EXPECT_EQ(resumed.text.find("passed 70 %"), std::string::npos) << resumed.text;
  EXPECT_NE(resumed.text.find("resumed in this conversation (context #2)"), std::string::npos)
      << resumed.text;
  Reply status = call(Tool::kGetCurrentStatus, Json::object(), "c2");
  EXPECT_EQ(status.structured["session"]["id"], id);

  Reply unknown = call(Tool::kResumeSession, {{"session_id", "wb_0000000000000000"}}, "c3");
  EXPECT_TRUE(unknown.is_error);
  Reply bad = call(Tool::kResumeSession, {{"session_id", "../../etc"}}, "c3");
  EXPECT_TRUE(bad.is_error);
  EXPECT_EQ(bad.structured["argument"], "session_id");
}

// An MCP process or conversation that only asks (every editor restart starts one, and calls
// get_current_status) leaves no session behind: a new session is stored, its workspace made,
// only once it has work in it, with the log of the calls made before.
TEST_F(WorkbenchTest, ANewSessionIsStoredOnlyOnceItHasWorkInIt) {
  for (const char* client : {"p1", "p2", "p3"}) {
    restart();  // a new process
    Reply status = call(Tool::kGetCurrentStatus, Json::object(), client);
    ASSERT_FALSE(status.is_error) << status.text;
    EXPECT_EQ(status.structured["stored"], false);
    EXPECT_EQ(status.structured["session"]["stored"], false);
    EXPECT_NE(status.text.find("No workbench session yet"), std::string::npos) << status.text;
    EXPECT_NE(status.text.find("set_kernel_name(name)"), std::string::npos) << status.text;
    EXPECT_FALSE(call(Tool::kGetOverview, Json::object(), client).is_error);
    EXPECT_FALSE(call(Tool::kCheckContextUsage, Json::object(), client).is_error);
    Reply listed = call(Tool::kListSessions, Json::object(), client);
    EXPECT_EQ(listed.structured["sessions"], Json::array()) << listed.text;
  }
  EXPECT_TRUE(store_->recent_sessions(10)->empty());
  EXPECT_TRUE(fs::is_empty(dir_ / "workbench"));  // the workspace root: no directory made

  // Named, it is stored: listed, resumable after a restart, its log complete.
  Reply status = call(Tool::kGetCurrentStatus, Json::object(), "p4");
  Reply named = call(Tool::kSetKernelName, {{"name", "relu"}}, "p4");
  ASSERT_FALSE(named.is_error) << named.text;
  const std::string id = named.structured["session"]["id"];
  EXPECT_EQ(status.structured["session"]["id"], id);
  EXPECT_EQ(named.structured["session"]["stored"], true);
  ASSERT_EQ(store_->recent_sessions(10)->size(), 1u);
  const fs::path ws = named.structured["session"]["workspace"].get<std::string>();
  const std::string jsonl = read_file(ws / "log" / (id + ".jsonl")).value();
  EXPECT_LT(jsonl.find("\"tool\":\"get_current_status\""),
            jsonl.find("\"tool\":\"set_kernel_name\""))
      << jsonl;
  restart();
  Reply fresh = call(Tool::kGetCurrentStatus, Json::object(), "p5");
  EXPECT_NE(fresh.text.find(id + " (relu, write)"), std::string::npos) << fresh.text;
  EXPECT_EQ(state_of(call(Tool::kResumeSession, {{"session_id", id}}, "p5")), "write");
  EXPECT_EQ(store_->recent_sessions(10)->size(), 1u);

  // A refused call is no work either (jobs are: StatelessFormsRunInAnyState... below).
  EXPECT_TRUE(call(Tool::kWriteKernelCode, {{"code", "def solve(x): return x"}}, "p6").is_error);
  EXPECT_EQ(store_->recent_sessions(10)->size(), 1u);
}

// Issue #37: a workbench session is its creator's principal's: another principal neither
// lists nor resumes it (the same answer as an unknown id), whatever MCP session it calls from.
TEST_F(WorkbenchTest, ASessionIsItsPrincipalsOnly) {
  const model::Principal alice{"alice", model::Role::kUser};
  const model::Principal bob{"bob", model::Role::kUser};
  Reply mine = call(Tool::kSetKernelName, {{"name", "relu"}}, "", alice);
  ASSERT_FALSE(mine.is_error) << mine.text;
  const std::string id = mine.structured["session"]["id"];
  // Bob, even from the same binding key (stateless MCP requests share ""), gets a new session
  // that lists nothing of Alice's.
  Reply fresh = call(Tool::kGetCurrentStatus, Json::object(), "", bob);
  EXPECT_NE(fresh.structured["session"]["id"], id);
  EXPECT_EQ(fresh.text.find(id), std::string::npos);
  Reply listed = call(Tool::kListSessions, Json::object(), "b2", bob);
  EXPECT_EQ(listed.text.find(id), std::string::npos);
  Reply stolen = call(Tool::kResumeSession, {{"session_id", id}}, "b2", bob);
  Reply unknown = call(Tool::kResumeSession, {{"session_id", "wb_0000000000000000"}}, "b2", bob);
  ASSERT_TRUE(stolen.is_error);
  EXPECT_EQ(stolen.text.find("wb_0000000000000000"), std::string::npos);
  std::string same = unknown.text;
  same.replace(same.find("wb_0000000000000000"), id.size(), id);
  EXPECT_EQ(stolen.text, same);
  // Alice, and an admin, still reach it.
  EXPECT_FALSE(call(Tool::kResumeSession, {{"session_id", id}}, "a2", alice).is_error);
  const model::Principal ops{"ops", model::Role::kAdmin};
  EXPECT_NE(call(Tool::kListSessions, Json::object(), "o1", ops).text.find(id), std::string::npos);
}

TEST_F(WorkbenchTest, PastSeventyPercentTheSummaryIsWrittenAndEveryAnswerSaysSo) {
  Reply named = call(Tool::kSetKernelName,
                     {{"name", "softmax"}, {"context_budget_tokens", 4000}, {"new_session", true}});
  ASSERT_FALSE(named.is_error) << named.text;
  const fs::path ws = named.structured["session"]["workspace"].get<std::string>();
  EXPECT_FALSE(fs::exists(ws / "docs" / "summarization.md"));
  Reply r;
  for (int i = 0; i < 10 && !r.structured["context"].contains("summary_file"); ++i) {
    r = call(Tool::kGetTritonSyntax);  // ~2-3k tokens each
  }
  ASSERT_TRUE(r.structured["context"].contains("summary_file")) << r.structured.dump();
  EXPECT_GE(r.structured["context"]["percent"].get<double>(), 70.0);
  EXPECT_NE(r.text.find("resume_session(session_id=\""), std::string::npos);
  const std::string summary = read_file(ws / "docs" / "summarization.md").value();
  EXPECT_NE(summary.find("resume_session"), std::string::npos);
  EXPECT_NE(summary.find("softmax"), std::string::npos);
  EXPECT_NE(summary.find("## Next steps"), std::string::npos);
  EXPECT_NE(summary.find("passed 70 % of its 4000-token budget"), std::string::npos) << summary;
  Reply usage = call(Tool::kCheckContextUsage);
  EXPECT_NE(usage.text.find("Over 70 %"), std::string::npos) << usage.text;
}

TEST_F(WorkbenchTest, StatelessFormsRunInAnyStateWithoutStoringAVersion) {
  const size_t before = jobs_.job_ids().size();
  auto f = start(
      Tool::kRunTritonKernel,
      {{"code", "def solve(x):\n    return x\n"},
       {"test_input_code", "sizes = [4, 8]\ndef make_inputs(n):\n    return [torch.ones(n)]\n"}});
  ASSERT_TRUE(jobs_.wait_for_jobs(before + 2, 10s));
  ASSERT_TRUE(jobs_.wait_for_waiters(2, 10s));
  const auto ids = jobs_.job_ids();
  for (size_t i = before; i < ids.size(); ++i) {
    ASSERT_TRUE(jobs_.finish(ids[i], passing_result()).is_ok());
  }
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  Reply r = f.get();
  EXPECT_FALSE(r.is_error) << r.text;
  EXPECT_EQ(state_of(r), "start");
  EXPECT_EQ(r.structured["session"]["versions"], 0);
  EXPECT_EQ(r.structured["session"]["stored"], true);  // it ran jobs: the session keeps them
  EXPECT_EQ(store_->recent_sessions(10)->size(), 1u);
  EXPECT_EQ(r.structured["cases"].size(), 2u);
  EXPECT_EQ(r.structured["cases"][1]["label"], "8");
}

TEST_F(WorkbenchTest, ExecutionErrorsAreReportedNotThrown) {
  call(Tool::kSetKernelName, {{"name", "softmax"}});
  Reply none = call(Tool::kValidateCorrectness,
                    {{"reference_code", kReference}, {"test_input_code", kInputs}});
  EXPECT_TRUE(none.is_error);
  EXPECT_NE(none.text.find("no kernel version yet"), std::string::npos) << none.text;
  call(Tool::kWriteKernelCode, {{"code", "def solve(x):\n    return x\n"}});
  Reply no_ref = call(Tool::kValidateCorrectness, {{"test_input_code", kInputs}});
  EXPECT_TRUE(no_ref.is_error);
  EXPECT_EQ(no_ref.structured["argument"], "reference_code");
  Reply bad_sizes = call(Tool::kRunTritonKernel, {{"test_input_code", "sizes = list(range(3))"}});
  EXPECT_TRUE(bad_sizes.is_error);
  EXPECT_EQ(bad_sizes.structured["argument"], "test_input_code");
  jobs_.set_submit_error(unavailable("shutting down"));
  Reply refused = call(Tool::kRunTritonKernel, {{"test_input_code", kInputs}});
  EXPECT_TRUE(refused.is_error);
  EXPECT_NE(refused.text.find("not accepted"), std::string::npos) << refused.text;
  jobs_.set_submit_error(Status::ok());
}

}  // namespace
}  // namespace kforge::workbench
