// DeviceGate: grants one at a time, in request order; a ticket destroyed (the job crashed,
// timed out, was cancelled or finished) gives the grant back or leaves the queue.
#include "kforge/workers/device_gate.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kforge/workers/cancel_token.h"

namespace kforge::workers {
namespace {

using Clock = std::chrono::steady_clock;

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

std::unique_ptr<DeviceGate::Ticket> take(DeviceGate& gate, const std::string& holder) {
  auto t = gate.request(holder);
  EXPECT_TRUE(t.is_ok());
  return std::move(t).value();
}

TEST(DeviceGateTest, TheFirstRequestIsGrantedAtOnceAndItsDescriptorIsReadable) {
  DeviceGate gate("cuda:0");
  auto a = take(gate, "job-a");
  EXPECT_TRUE(a->granted());
  EXPECT_TRUE(readable(a->fd()));
  Json s = gate.status();
  EXPECT_EQ(s["holder"], "job-a");
  EXPECT_EQ(s["waiting"], 0);
  EXPECT_EQ(s["grants"], 1);
}

TEST(DeviceGateTest, GrantsGoOutOneAtATimeInRequestOrder) {
  DeviceGate gate("cuda:0");
  auto a = take(gate, "a");
  auto b = take(gate, "b");
  auto c = take(gate, "c");
  EXPECT_FALSE(b->granted());
  EXPECT_FALSE(readable(b->fd()));
  EXPECT_FALSE(c->granted());
  EXPECT_EQ(gate.status()["waiting"], 2);
  a.reset();
  EXPECT_TRUE(b->granted());
  EXPECT_TRUE(readable(b->fd()));
  EXPECT_FALSE(c->granted());
  b.reset();
  EXPECT_TRUE(c->granted());
  EXPECT_EQ(gate.status()["grants"], 3);
  c.reset();
  EXPECT_TRUE(gate.status()["holder"].is_null());
}

TEST(DeviceGateTest, AWaiterThatGoesAwayLeavesTheQueueWithoutTheGrant) {
  // A job cancelled (or timed out, or crashed) while it waited for the device.
  DeviceGate gate("cuda:0");
  auto a = take(gate, "a");
  auto b = take(gate, "b");
  auto c = take(gate, "c");
  b.reset();
  EXPECT_EQ(gate.status()["waiting"], 1);
  a.reset();
  EXPECT_TRUE(c->granted());
  EXPECT_EQ(gate.status()["grants"], 2);
}

TEST(DeviceGateTest, AHolderThatGoesAwayGivesTheGrantToTheNext) {
  DeviceGate gate("cuda:0");
  auto a = take(gate, "crashing");
  auto b = take(gate, "next");
  a.reset();  // what run_job_on_child's end does for a crash, a timeout or a cancel
  EXPECT_TRUE(b->wait_until(Clock::now() + std::chrono::seconds(1)));
  EXPECT_EQ(gate.status()["holder"], "next");
}

TEST(DeviceGateTest, WaitUntilTimesOutWhileAnotherHoldsTheDevice) {
  DeviceGate gate("cuda:0");
  auto a = take(gate, "a");
  auto b = take(gate, "b");
  EXPECT_FALSE(b->wait_until(Clock::now() + std::chrono::milliseconds(20)));
}

TEST(DeviceGateTest, ATicketMayOutliveItsGate) {
  std::unique_ptr<DeviceGate::Ticket> a;
  {
    DeviceGate gate("cuda:0");
    a = take(gate, "a");
  }
  EXPECT_TRUE(a->granted());
  a.reset();
}

TEST(DeviceGateTest, ConcurrentJobsNeverHoldTheDeviceTogether) {
  DeviceGate gate("cuda:0");
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::mutex order_mu;
  std::vector<int> order;
  std::vector<std::thread> jobs;
  for (int i = 0; i < 8; ++i) {
    jobs.emplace_back([&, i] {
      for (int round = 0; round < 20; ++round) {
        auto t = gate.request("job-" + std::to_string(i));
        ASSERT_TRUE(t.is_ok());
        ASSERT_TRUE((*t)->wait_until(Clock::now() + std::chrono::seconds(30)));
        int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        {
          std::lock_guard lock(order_mu);
          order.push_back(i);
        }
        std::this_thread::yield();
        --inside;
      }
    });
  }
  for (auto& t : jobs)
    t.join();
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(order.size(), 160u);
  EXPECT_EQ(gate.status()["grants"], 160);
}

TEST(DeviceGateTest, AcquireWaitsForTheHolderAndStopsOnCancelOrDeadline) {
  DeviceGate gate("cuda:0");
  auto a = take(gate, "a");
  auto late = gate.acquire("late", -1, Clock::now() + std::chrono::milliseconds(30));
  ASSERT_FALSE(late.is_ok());
  EXPECT_EQ(late.status().code(), ErrorCode::kDeadlineExceeded);
  CancelToken cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    cancel.cancel();
  });
  auto cancelled =
      gate.acquire("cancelled", cancel.wait_fd(), Clock::now() + std::chrono::seconds(10));
  canceller.join();
  ASSERT_FALSE(cancelled.is_ok());
  EXPECT_EQ(cancelled.status().code(), ErrorCode::kCancelled);
  EXPECT_EQ(gate.status()["waiting"], 0);  // neither stayed in the queue
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    a.reset();
  });
  auto next = gate.acquire("next", -1, Clock::now() + std::chrono::seconds(10));
  releaser.join();
  ASSERT_TRUE(next.is_ok());
  EXPECT_TRUE((*next)->granted());
}

}  // namespace
}  // namespace kforge::workers
