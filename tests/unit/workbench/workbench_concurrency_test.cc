// The Workbench under concurrent calls, for ThreadSanitizer (also in kforge_tsan_tests): many
// callers at once, each on its own session and some on a shared one, with execution tools
// whose jobs finish on another thread, list_sessions reading every session meanwhile, and the
// SQLite store written from the executor's threads. Calls on one session are serialised, so no
// version written to a shared session is lost.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fakes/fake_job_service.h"
#include "kforge/common/random.h"
#include "kforge/store/sqlite/sqlite_workbench_store.h"
#include "kforge/workbench/workbench.h"

namespace kforge::workbench::workbench_concurrency {  // named: a unity TU holds other tests'
                                                      // helpers
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int kCallers = 4;
constexpr const char* kInputs = "args = [torch.randn(64, 100, device=DEVICE)]\n";
constexpr const char* kReference =
    "import torch\ndef reference(x):\n    return torch.softmax(x, -1)\n";

class WorkbenchConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kforge-wb-conc-" + random_hex(6));
    auto store = store::SqliteWorkbenchStore::open({dir_ / "kforge.db"});
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    auto knowledge = Knowledge::load();
    ASSERT_TRUE(knowledge.is_ok()) << knowledge.status().to_string();
    WorkbenchOptions o;
    o.root = dir_ / "workbench";
    o.device = "cpu";
    auto wb = Workbench::create(
        o, jobs_, std::shared_ptr<store::WorkbenchStore>(std::move(store).value()), *knowledge,
        [this](std::function<void()> task) { boost::asio::post(pool_, std::move(task)); });
    ASSERT_TRUE(wb.is_ok()) << wb.status().to_string();
    wb_ = std::move(wb).value();
    finisher_ = std::thread([this] { finish_jobs(); });
  }
  void TearDown() override {
    stop_ = true;
    finisher_.join();
    pool_.join();
    wb_.reset();
    fs::remove_all(dir_);
  }

  // Finishes every queued job as a correct one, as the jobs' own threads would.
  void finish_jobs() {
    while (!stop_.load()) {
      for (const auto& id : jobs_.job_ids()) {
        if (jobs_.get(id)->state == model::JobState::kQueued) {
          jobs_.finish(id, Json{{"compiled", true}, {"correctness", true}}).ignore();
        }
      }
      std::this_thread::sleep_for(1ms);
    }
  }

  Reply call(const std::string& client, Tool tool, Json args = Json::object()) {
    auto promise = std::make_shared<std::promise<Reply>>();
    auto future = promise->get_future();
    Caller caller;
    caller.client = client;
    wb_->call(caller, tool, std::move(args),
              [promise](Reply r) { promise->set_value(std::move(r)); });
    EXPECT_EQ(future.wait_for(20s), std::future_status::ready) << client;
    return future.get();
  }

  fs::path dir_;
  testing::FakeJobService jobs_;
  boost::asio::thread_pool pool_{3};
  std::unique_ptr<Workbench> wb_;
  std::atomic<bool> stop_{false};
  std::thread finisher_;
};

TEST_F(WorkbenchConcurrencyTest, CallersOnTheirOwnSessionsAndOnASharedOneAtOnce) {
  Reply named = call("owner", Tool::kSetKernelName, {{"name", "shared_softmax"}});
  ASSERT_FALSE(named.is_error) << named.text;
  const std::string shared = named.structured["session"]["id"];

  std::vector<std::thread> threads;
  std::atomic<int> listed{0};
  std::atomic<int> shared_writes{0};
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] {
      const std::string me = "caller" + std::to_string(i);
      const std::string kernel = "k" + std::to_string(i);
      Reply name = call(me, Tool::kSetKernelName, {{"name", kernel}});
      ASSERT_FALSE(name.is_error) << name.text;
      Reply wrote = call(me, Tool::kWriteKernelCode, {{"code", "def solve(x):\n    return x\n"}});
      ASSERT_FALSE(wrote.is_error) << wrote.text;
      // Its jobs finish on the finisher's thread while the other callers run theirs.
      Reply ran = call(me, Tool::kValidateCorrectness,
                       {{"reference_code", kReference}, {"test_input_code", kInputs}});
      EXPECT_EQ(ran.structured["session"]["kernel_name"], kernel) << ran.text;
      EXPECT_EQ(ran.structured["session"]["versions"], 1) << ran.text;
      // Versions on the shared session, racing the other callers: a write another one's
      // write has just moved to evaluation is refused, never lost.
      for (int k = 0; k < 3; ++k) {
        call(me, Tool::kForceTransitionToWrite, {{"session_id", shared}});
        Reply onto =
            call(me, Tool::kWriteKernelCode,
                 {{"session_id", shared}, {"code", "def solve(x):\n    return x  # " + me + "\n"}});
        if (!onto.is_error) ++shared_writes;
      }
      Reply all = call(me, Tool::kListSessions);
      if (!all.is_error) ++listed;
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(listed.load(), kCallers);
  ASSERT_GT(shared_writes.load(), 0);
  Reply status = call("owner", Tool::kGetCurrentStatus, {{"session_id", shared}});
  ASSERT_FALSE(status.is_error) << status.text;
  EXPECT_EQ(status.structured["session"]["versions"], shared_writes.load()) << status.text;
}

}  // namespace
}  // namespace kforge::workbench::workbench_concurrency
