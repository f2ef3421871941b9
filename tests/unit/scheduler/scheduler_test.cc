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

}  // namespace
}  // namespace kforge::scheduler
