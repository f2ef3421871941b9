// JobServiceImpl::prometheus_metrics (GET /metrics) over a real SQLite store and a fake worker.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <future>

#include "fakes/fake_worker.h"
#include "kforge/common/clock.h"
#include "kforge/jobs/job_service_impl.h"
#include "kforge/model/parse.h"
#include "kforge/store/sqlite/sqlite_store.h"

namespace kforge::jobs {
namespace {

model::JobRequest request_of(const std::string& kernel_type) {
  Json body = {{"kernel", {{"source_code", "class Model: pass"}, {"kernel_type", kernel_type}}}};
  auto r = model::parse_evaluate_request(body, model::RequestLimits{});
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return *r;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

class JobServiceMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kforge-metrics-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store::SqliteStore::Options o;
    o.path = dir_ / "kforge.db";
    auto store = store::SqliteStore::open(o);
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    std::vector<DeviceWorkers> devices;
    DeviceWorkers cpu;
    cpu.device = {"cpu", false};
    auto worker = std::make_unique<testing::FakeWorker>();
    worker_ = worker.get();
    cpu.by_type["python"] = std::move(worker);
    devices.push_back(std::move(cpu));
    service_ = std::make_unique<JobServiceImpl>(JobServiceImpl::Options{}, std::move(store).value(),
                                                std::move(devices), SystemClock::instance());
    ASSERT_TRUE(service_->start().is_ok());
  }
  void TearDown() override {
    service_.reset();
    std::filesystem::remove_all(dir_);
  }

  void run_to_the_end(const std::string& kernel_type) {
    auto job = service_->submit(request_of(kernel_type), "test");
    ASSERT_TRUE(job.is_ok()) << job.status().to_string();
    std::promise<void> done;
    auto sub = service_->when_done(job->id, [&](const model::JobRecord&) { done.set_value(); });
    ASSERT_TRUE(sub.is_ok());
    ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  }

  std::filesystem::path dir_;
  std::unique_ptr<JobServiceImpl> service_;
  testing::FakeWorker* worker_ = nullptr;
};

TEST_F(JobServiceMetricsTest, AfterJobsTheMetricsCountThemAndTheirPhases) {
  run_to_the_end("torch");
  run_to_the_end("torch");
  run_to_the_end("torch_cuda");
  // The device counted each job before its done callbacks ran: no wait for the count.
  const std::string device_jobs = "kforge_device_jobs_total{device=\"cpu\",kind=\"cpu\"} 3";
  auto text = service_->prometheus_metrics();
  ASSERT_TRUE(text.is_ok()) << text.status().to_string();
  const std::string& t = *text;
  EXPECT_TRUE(has_line(t, "kforge_jobs_finished_total{state=\"success\",kernel_type=\"torch\"} 2"))
      << t;
  EXPECT_TRUE(
      has_line(t, "kforge_jobs_finished_total{state=\"success\",kernel_type=\"torch_cuda\"} 1"));
  EXPECT_TRUE(has_line(t, "kforge_jobs_stored{state=\"success\"} 3"));
  EXPECT_TRUE(has_line(t, "kforge_jobs_submitted_total 3"));
  EXPECT_TRUE(
      has_line(t, "kforge_job_phase_seconds_count{phase=\"timing\",kernel_type=\"torch\"} 2"));
  EXPECT_TRUE(
      has_line(t, "kforge_job_phase_seconds_sum{phase=\"timing\",kernel_type=\"torch\"} 3"));
  EXPECT_TRUE(has_line(t,
                       "kforge_job_phase_seconds_bucket{phase=\"import\",kernel_type=\"torch_"
                       "cuda\",le=\"0.05\"} 1"));
  EXPECT_TRUE(has_line(t, "kforge_job_run_seconds_count{kernel_type=\"torch\"} 2"));
  EXPECT_TRUE(has_line(t, "kforge_queue_depth 0"));
  EXPECT_TRUE(has_line(t, "kforge_queue_jobs 0"));
  EXPECT_TRUE(has_line(t, "kforge_queue_bytes 0"));
  EXPECT_TRUE(has_line(t, "kforge_worker_restarts_total{device=\"cpu\",worker=\"python\"} 0"));
  EXPECT_TRUE(has_line(t, device_jobs));
  EXPECT_NE(t.find("kforge_device_busy_seconds_total{device=\"cpu\",kind=\"cpu\"} "),
            std::string::npos);
  EXPECT_EQ(t.find("kforge_jobs{"), std::string::npos);  // none queued or running now
}

TEST_F(JobServiceMetricsTest, JobsHeldNowAreCountedByStateAndKernelType) {
  worker_->hold(true);
  auto first = service_->submit(request_of("torch_cuda"), "test");
  auto second = service_->submit(request_of("torch_cuda"), "test");
  ASSERT_TRUE(first.is_ok() && second.is_ok());
  ASSERT_TRUE(worker_->wait_started(1));
  auto text = service_->prometheus_metrics();
  ASSERT_TRUE(text.is_ok());
  EXPECT_TRUE(has_line(*text, "kforge_jobs{state=\"running\",kernel_type=\"torch_cuda\"} 1"))
      << *text;
  EXPECT_TRUE(has_line(*text, "kforge_jobs{state=\"queued\",kernel_type=\"torch_cuda\"} 1"));
  EXPECT_TRUE(has_line(*text, "kforge_queue_jobs 2"));
  EXPECT_TRUE(has_line(*text, "kforge_device_busy{device=\"cpu\",kind=\"cpu\"} 1"));
  worker_->hold(false);
  worker_->release_all();
}

}  // namespace
}  // namespace kforge::jobs
