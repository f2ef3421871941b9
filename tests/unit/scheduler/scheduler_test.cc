#include "kforge/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>

namespace kforge::scheduler {
namespace {

TEST(SchedulerTest, ResolvesTargets) {
  Scheduler gpu_box({{"cpu", false}, {"cuda:0", true}, {"cuda:1", true}}, nullptr, nullptr);
  EXPECT_EQ(*gpu_box.resolve_target(""), "gpu");
  EXPECT_EQ(*gpu_box.resolve_target("CUDA"), "gpu");
  EXPECT_EQ(*gpu_box.resolve_target("cuda:1"), "cuda:1");
  EXPECT_EQ(*gpu_box.resolve_target("gpu:0"), "cuda:0");
  EXPECT_EQ(*gpu_box.resolve_target("cpu"), "cpu");
  auto bad = gpu_box.resolve_target("cuda:5");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().field_path(), "device");
  Scheduler cpu_box({{"cpu", false}}, nullptr, nullptr);
  EXPECT_EQ(*cpu_box.resolve_target(""), "cpu");
  EXPECT_FALSE(cpu_box.resolve_target("gpu").is_ok());
}

TEST(SchedulerTest, OneJobPerDeviceAtATimeAndAnyGpuGoesToAFreeGpu) {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, int> running;
  int max_per_device = 0;
  std::vector<std::pair<std::string, std::string>> ran;
  Scheduler s(
      {{"cuda:0", true}, {"cuda:1", true}},
      [&](const std::string& job, const std::string& device) {
        {
          std::lock_guard lock(mu);
          max_per_device = std::max(max_per_device, ++running[device]);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::lock_guard lock(mu);
        --running[device];
        ran.emplace_back(job, device);
        cv.notify_all();
      },
      nullptr);
  s.start();
  for (int i = 0; i < 10; ++i)
    s.enqueue("j" + std::to_string(i), "gpu");
  s.enqueue("pinned", "cuda:1");
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return ran.size() == 11; }));
  EXPECT_EQ(max_per_device, 1);
  std::map<std::string, int> per_device;
  for (const auto& [job, device] : ran) {
    ++per_device[device];
    if (job == "pinned") {
      EXPECT_EQ(device, "cuda:1");
    }
  }
  EXPECT_GT(per_device["cuda:0"], 0);
  EXPECT_GT(per_device["cuda:1"], 0);
  lock.unlock();
  s.stop();
}

TEST(SchedulerTest, RemoveTakesAQueuedJobOut) {
  std::atomic<int> runs{0};
  Scheduler s(
      {{"cpu", false}}, [&](const std::string&, const std::string&) { ++runs; }, nullptr);
  s.enqueue("a", "cpu");
  EXPECT_EQ(s.queue_depth(), 1u);
  EXPECT_TRUE(s.remove("a"));
  EXPECT_FALSE(s.remove("a"));
  s.start();
  s.stop();
  EXPECT_EQ(runs.load(), 0);
}

TEST(SchedulerTest, AJobEndedByTheRunFunctionIsCountedBeforeItReturns) {
  // The run function says the job ended, tells a waiter (as a job's done callbacks do) and
  // keeps the runner until the waiter has read the device: the waiter sees the job counted.
  std::mutex mu;
  std::condition_variable cv;
  bool told = false;
  bool read = false;
  Scheduler* scheduler = nullptr;
  Scheduler s(
      {{"cpu", false}},
      [&](const std::string& job, const std::string&) {
        scheduler->job_ended(job);
        scheduler->job_ended(job);  // a second call counts nothing
        std::unique_lock lock(mu);
        told = true;
        cv.notify_all();
        cv.wait_for(lock, std::chrono::seconds(10), [&] { return read; });
      },
      nullptr);
  scheduler = &s;
  s.start();
  s.enqueue("a", "cpu");
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return told; }));
  }
  Json status = s.device_status();
  EXPECT_EQ(status[0]["jobs_run"], 1);
  EXPECT_EQ(status[0]["running"], 0);
  EXPECT_EQ(status[0]["busy"], false);
  EXPECT_FALSE(status[0].contains("current_job"));
  {
    std::lock_guard lock(mu);
    read = true;
  }
  cv.notify_all();
  s.stop();
  EXPECT_EQ(s.device_status()[0]["jobs_run"], 1);  // the runner did not count it again
  s.job_ended("unknown");                          // not running here: nothing
  EXPECT_EQ(s.device_status()[0]["jobs_run"], 1);
}

TEST(SchedulerTest, DepthLetsThatManyJobsOfADeviceBeInFlightAndPreparesOnce) {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
  int most = 0;
  int finished = 0;
  std::atomic<int> prepared{0};
  bool release = false;
  Scheduler s(
      {{"cuda:0", true, 3}},
      [&](const std::string&, const std::string&) {
        std::unique_lock lock(mu);
        most = std::max(most, ++running);
        cv.notify_all();
        cv.wait(lock, [&] { return release; });
        --running;
        ++finished;
        cv.notify_all();
      },
      [&](const std::string&) { ++prepared; });
  s.start();
  for (int i = 0; i < 7; ++i)
    s.enqueue("j" + std::to_string(i), "gpu");
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return running == 3; }));
  }
  Json status = s.device_status();
  EXPECT_EQ(status[0]["running"], 3);
  EXPECT_EQ(status[0]["depth"], 3);
  EXPECT_EQ(status[0]["busy"], true);
  EXPECT_EQ(status[0]["current_job"], "j0");
  EXPECT_EQ(status[0]["queued"], 0);  // the shared "gpu" queue is not the device's own
  EXPECT_EQ(s.queue_depth(), 4u);
  {
    std::unique_lock lock(mu);
    release = true;
    cv.notify_all();
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return finished == 7; }));
  }
  s.stop();
  EXPECT_EQ(most, 3);
  EXPECT_EQ(prepared.load(), 1);
  status = s.device_status();
  EXPECT_EQ(status[0]["running"], 0);
  EXPECT_EQ(status[0]["busy"], false);
  EXPECT_EQ(status[0]["jobs_run"], 7);
}

TEST(SchedulerTest, WithDepthAnyGpuJobGoesToTheGpuWithFewerJobsInFlight) {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> where;
  bool release = false;
  Scheduler s(
      {{"cuda:0", true, 2}, {"cuda:1", true, 2}},
      [&](const std::string& job, const std::string& device) {
        std::unique_lock lock(mu);
        where[job] = device;
        cv.notify_all();
        cv.wait(lock, [&] { return release; });
      },
      nullptr);
  s.start();
  s.enqueue("first", "gpu");
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return where.size() == 1; }));
  }
  s.enqueue("second", "gpu");
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return where.size() == 2; }));
    EXPECT_NE(where["first"], where["second"]);
    release = true;
    cv.notify_all();
  }
  s.stop();
}

}  // namespace
}  // namespace kforge::scheduler
