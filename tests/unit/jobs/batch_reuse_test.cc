// The engine's side of reference reuse: the jobs of a batch, run by JobServiceImpl, get the
// digest the previous judge of the batch reported (jobs/reference_reuse.h).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <future>
#include <mutex>

#include "kforge/common/clock.h"
#include "kforge/jobs/batch.h"
#include "kforge/jobs/job_service_impl.h"
#include "kforge/store/sqlite/sqlite_store.h"

namespace kforge::jobs {
namespace {

// Records each job's spec and answers as a judge that stored the reference file would.
class RecordingWorker final : public workers::Worker {
 public:
  std::string_view type() const override { return "python"; }
  void prepare() override {}
  workers::WorkerOutcome run(const workers::WorkerJob& job, workers::CancelToken&,
                             const workers::ProgressSink&) override {
    std::lock_guard lock(mu_);
    specs.push_back(job.spec);
    const std::string digest(64, static_cast<char>('a' + specs.size()));
    return {workers::WorkerOutcome::Kind::kResult,
            Json{{"compiled", true},
                 {"correctness", true},
                 {"reference_reuse", {{"sha256", digest}, {"stored", true}}}},
            {}};
  }
  workers::WorkerState state() const override { return workers::WorkerState::kReady; }
  Json status() const override { return Json::object(); }
  void shutdown() override {}

  std::mutex mu_;
  std::vector<Json> specs;
};

TEST(BatchReuseTest, EachJudgeOfABatchGetsThePreviousJudgesDigest) {
  char tmpl[] = "/tmp/kforge-batch-reuse-XXXXXX";
  const std::filesystem::path dir = mkdtemp(tmpl);
  store::SqliteStore::Options so;
  so.path = dir / "kforge.db";
  auto store = store::SqliteStore::open(so);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  std::vector<DeviceWorkers> devices;
  DeviceWorkers cpu;
  cpu.device = {"cpu", false};
  auto owned = std::make_unique<RecordingWorker>();
  RecordingWorker* worker = owned.get();
  cpu.by_type["python"] = std::move(owned);
  devices.push_back(std::move(cpu));
  JobServiceImpl::Options o;
  o.reference_cache_dir = dir / "reference";
  std::filesystem::create_directories(o.reference_cache_dir / "batch-stale");
  auto service = std::make_unique<JobServiceImpl>(o, std::move(store).value(), std::move(devices),
                                                  SystemClock::instance());
  ASSERT_TRUE(service->start().is_ok());
  // Nothing survives a restart.
  EXPECT_FALSE(std::filesystem::exists(o.reference_cache_dir / "batch-stale"));

  Json body = {{"ref_kernel", {{"source_code", "class Model: pass"}, {"kernel_type", "torch"}}},
               {"candidates",
                {{{"source_code", "class A: pass"}, {"kernel_type", "torch"}},
                 {{"source_code", "class B: pass"}, {"kernel_type", "torch"}},
                 {{"source_code", "class C: pass"}, {"kernel_type", "torch"}}}},
               {"device", "cpu"}};
  auto request = model::parse_batch_request(body, {});
  ASSERT_TRUE(request.is_ok());
  auto batch = submit_batch(*service, nullptr, std::move(request).value(), "test");
  ASSERT_TRUE(batch.is_ok()) << batch.status().to_string();
  std::promise<Json> all;
  auto watch = BatchWatch::start(
      *service, *batch, [](size_t, const model::JobRecord&, const Json&, size_t) {},
      [&](Json views) { all.set_value(std::move(views)); });
  auto done = all.get_future();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  Json views = done.get();
  ASSERT_EQ(views.size(), 3u);

  std::vector<Json> specs;
  {
    std::lock_guard lock(worker->mu_);
    specs = worker->specs;
  }
  ASSERT_EQ(specs.size(), 3u);
  const Json& first = specs[0]["reference_reuse"];
  ASSERT_TRUE(first.is_object()) << specs[0].dump();
  EXPECT_EQ(first["dir"], (o.reference_cache_dir / batch->id).string());
  EXPECT_TRUE(first["sha256"].is_null());
  EXPECT_EQ(specs[1]["reference_reuse"]["key"], first["key"]);
  EXPECT_EQ(specs[1]["reference_reuse"]["sha256"], std::string(64, 'b'));
  EXPECT_EQ(specs[2]["reference_reuse"]["sha256"], std::string(64, 'c'));
  // The batch's seed reached every job.
  EXPECT_EQ(specs[0]["seed"], specs[2]["seed"]);
  // The judge's report reaches the client.
  EXPECT_EQ(views[0]["kernel_exec_result"]["reference_reuse"]["stored"], true);
  service->stop();
  service.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kforge::jobs
