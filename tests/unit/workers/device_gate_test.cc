// DeviceGate: grants one at a time, in request order; a ticket destroyed (the job crashed,
// timed out, was cancelled or finished) gives the grant back or leaves the queue.
#include "kforge/workers/device_gate.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
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

using Mode = DeviceGate::Mode;

std::unique_ptr<DeviceGate::Ticket> take(DeviceGate& gate, const std::string& holder,
                                         Mode mode = Mode::kExclusive) {
  auto t = gate.request(holder, mode);
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

// --- The reader/writer grant (shared correctness phases, exclusive timed regions) ---

TEST(DeviceGateTest, SharedRequestsAreGrantedTogetherUpToTheLimit) {
  DeviceGate gate("cuda:0", 3);
  auto a = take(gate, "a", Mode::kShared);
  auto b = take(gate, "b", Mode::kShared);
  auto c = take(gate, "c", Mode::kShared);
  auto d = take(gate, "d", Mode::kShared);
  EXPECT_TRUE(a->granted());
  EXPECT_TRUE(b->granted());
  EXPECT_TRUE(c->granted());
  EXPECT_TRUE(readable(c->fd()));
  EXPECT_FALSE(d->granted());  // the fourth waits for room
  EXPECT_FALSE(readable(d->fd()));
  Json s = gate.status();
  EXPECT_EQ(s["shared_holders"], Json::array({"a", "b", "c"}));
  EXPECT_TRUE(s["holder"].is_null());
  EXPECT_EQ(s["max_shared"], 3);
  b.reset();
  EXPECT_TRUE(d->granted());
  EXPECT_EQ(gate.status()["shared_holders"], Json::array({"a", "c", "d"}));
}

TEST(DeviceGateTest, AnExclusiveRequestWaitsForEverySharedHolder) {
  DeviceGate gate("cuda:0", 4);
  auto a = take(gate, "a", Mode::kShared);
  auto b = take(gate, "b", Mode::kShared);
  auto x = take(gate, "timing", Mode::kExclusive);
  EXPECT_FALSE(x->granted());
  EXPECT_EQ(gate.status()["waiting_exclusive"], 1);
  a.reset();
  EXPECT_FALSE(x->granted());  // b still holds it
  b.reset();
  EXPECT_TRUE(x->granted());
  EXPECT_TRUE(readable(x->fd()));
  Json s = gate.status();
  EXPECT_EQ(s["holder"], "timing");
  EXPECT_EQ(s["shared_holders"], Json::array());
  EXPECT_EQ(s["exclusive_grants"], 1);
}

TEST(DeviceGateTest, SharedRequestsQueueBehindAWaitingExclusiveOne) {
  // No starvation of timing: a stream of new correctness phases does not keep it waiting.
  DeviceGate gate("cuda:0", 4);
  auto a = take(gate, "a", Mode::kShared);
  auto x = take(gate, "timing", Mode::kExclusive);
  auto late = take(gate, "late", Mode::kShared);
  EXPECT_FALSE(late->granted());  // there was room, but the exclusive request came first
  a.reset();
  EXPECT_TRUE(x->granted());
  EXPECT_FALSE(late->granted());  // nobody shares with an exclusive holder
  x.reset();
  EXPECT_TRUE(late->granted());
}

TEST(DeviceGateTest, NothingIsGrantedBesideAnExclusiveHolder) {
  DeviceGate gate("cuda:0", 4);
  auto x = take(gate, "timing", Mode::kExclusive);
  auto s1 = take(gate, "s1", Mode::kShared);
  auto y = take(gate, "y", Mode::kExclusive);
  EXPECT_FALSE(s1->granted());
  EXPECT_FALSE(y->granted());
  x.reset();
  EXPECT_TRUE(s1->granted());  // FIFO: the shared request was first
  EXPECT_FALSE(y->granted());
  s1.reset();
  EXPECT_TRUE(y->granted());
}

TEST(DeviceGateTest, WarmingProcessesArePausedWhileAnExclusiveHolderIsIn) {
  DeviceGate gate("cuda:0", 4);
  std::vector<std::string> events;
  auto record = [&events](const std::string& who) {
    return [&events, who](bool pause) { events.push_back(who + (pause ? " stop" : " cont")); };
  };
  auto w1 = gate.warming(record("w1"));
  auto a = take(gate, "a", Mode::kShared);
  EXPECT_TRUE(events.empty());  // shared holders run beside warm-ups
  auto x = take(gate, "timing", Mode::kExclusive);
  EXPECT_FALSE(x->granted());
  EXPECT_TRUE(events.empty());  // paused only once the exclusive grant is given
  a.reset();
  EXPECT_TRUE(x->granted());
  EXPECT_EQ(events, (std::vector<std::string>{"w1 stop"}));
  auto w2 = gate.warming(record("w2"));  // registered during the timed region: paused at once
  EXPECT_EQ(events.back(), "w2 stop");
  // The next exclusive grant follows at once: nobody is continued in between.
  auto y = take(gate, "timing-2", Mode::kExclusive);
  x.reset();
  EXPECT_TRUE(y->granted());
  EXPECT_EQ(events.size(), 2u);
  Json s = gate.status();
  EXPECT_EQ(s["warming"], 2);
  EXPECT_EQ(s["warming_pauses"], 1);
  y.reset();
  EXPECT_EQ(events, (std::vector<std::string>{"w1 stop", "w2 stop", "w1 cont", "w2 cont"}));
  // A warm-up that ends is forgotten; one that ends while paused is continued first.
  w1.reset();
  auto z = take(gate, "timing-3", Mode::kExclusive);
  EXPECT_EQ(events.back(), "w2 stop");
  w2.reset();
  EXPECT_EQ(events.back(), "w2 cont");
  EXPECT_EQ(gate.status()["warming"], 0);
  EXPECT_EQ(gate.status()["warmed"], 2);  // registrations so far
  z.reset();
  EXPECT_EQ(events.size(), 6u);
}

TEST(DeviceGateTest, ConsecutiveSharedWaitersAreGrantedTogetherAfterAnExclusiveHolder) {
  DeviceGate gate("cuda:0", 2);
  auto x = take(gate, "timing", Mode::kExclusive);
  auto a = take(gate, "a", Mode::kShared);
  auto b = take(gate, "b", Mode::kShared);
  auto c = take(gate, "c", Mode::kShared);
  auto y = take(gate, "y", Mode::kExclusive);
  x.reset();
  EXPECT_TRUE(a->granted());
  EXPECT_TRUE(b->granted());
  EXPECT_FALSE(c->granted());  // the limit
  EXPECT_FALSE(y->granted());
  a.reset();
  EXPECT_TRUE(c->granted());
  EXPECT_FALSE(y->granted());
  b.reset();
  c.reset();
  EXPECT_TRUE(y->granted());
}

TEST(DeviceGateTest, AnExclusiveWaiterThatLeavesLetsTheSharedOnesBehindItIn) {
  // A job cancelled (or crashed) while it waited for its timed region.
  DeviceGate gate("cuda:0", 4);
  auto a = take(gate, "a", Mode::kShared);
  auto x = take(gate, "cancelled", Mode::kExclusive);
  auto b = take(gate, "b", Mode::kShared);
  EXPECT_FALSE(b->granted());
  x.reset();
  EXPECT_TRUE(b->granted());
  EXPECT_TRUE(readable(b->fd()));
  EXPECT_EQ(gate.status()["waiting"], 0);
}

TEST(DeviceGateTest, ACrashedHolderOfEitherModeGivesTheDeviceBack) {
  // A holder's thread that dies by an exception: its ticket is destroyed on the way out,
  // as run_job_on_child's ticket is when a job crashes, times out or is cancelled.
  DeviceGate gate("cuda:0", 2);
  for (Mode mode : {Mode::kShared, Mode::kExclusive}) {
    std::unique_ptr<DeviceGate::Ticket> waiter;
    std::thread crashing([&] {
      try {
        auto held = take(gate, "crashing", mode);
        ASSERT_TRUE(held->granted());
        waiter = take(gate, "next", Mode::kExclusive);
        throw std::runtime_error("the job crashed");
      } catch (const std::runtime_error&) {
      }
    });
    crashing.join();
    ASSERT_TRUE(waiter);
    EXPECT_TRUE(waiter->wait_until(Clock::now() + std::chrono::seconds(1)));
    EXPECT_EQ(gate.status()["holder"], "next");
  }
}

TEST(DeviceGateTest, AcquireTakesAModeAndAnExclusiveOneWaitsForSharedHolders) {
  DeviceGate gate("cuda:0", 2);
  auto a = gate.acquire("a", -1, Clock::now() + std::chrono::seconds(1), Mode::kShared);
  ASSERT_TRUE(a.is_ok());
  auto b = gate.acquire("b", -1, Clock::now() + std::chrono::seconds(1), Mode::kShared);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ((*b)->mode(), Mode::kShared);
  auto x = gate.acquire("x", -1, Clock::now() + std::chrono::milliseconds(30));
  ASSERT_FALSE(x.is_ok());
  EXPECT_EQ(x.status().code(), ErrorCode::kDeadlineExceeded);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    a->reset();
    b->reset();
  });
  auto y = gate.acquire("y", -1, Clock::now() + std::chrono::seconds(10));
  releaser.join();
  ASSERT_TRUE(y.is_ok());
  EXPECT_EQ(gate.status()["holder"], "y");
}

TEST(DeviceGateTest, ConcurrentJobsShareCorrectnessAndNeverOverlapTimedRegions) {
  // Each job: a shared phase, then an exclusive one (its timing), as a pipelined Python
  // job does. Exclusive holders are alone; shared holders never exceed the limit.
  constexpr int kMaxShared = 3;
  DeviceGate gate("cuda:0", kMaxShared);
  std::atomic<int> shared_in{0};
  std::atomic<int> exclusive_in{0};
  std::atomic<int> most_shared{0};
  std::atomic<bool> overlap{false};
  std::vector<std::thread> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.emplace_back([&, i] {
      for (int round = 0; round < 15; ++round) {
        const std::string id = "job-" + std::to_string(i);
        {
          auto s = gate.request(id, Mode::kShared);
          ASSERT_TRUE(s.is_ok());
          ASSERT_TRUE((*s)->wait_until(Clock::now() + std::chrono::seconds(30)));
          int now = ++shared_in;
          if (exclusive_in.load() != 0) overlap = true;
          int seen = most_shared.load();
          while (now > seen && !most_shared.compare_exchange_weak(seen, now)) {
          }
          std::this_thread::yield();
          --shared_in;
        }
        auto x = gate.request(id, Mode::kExclusive);
        ASSERT_TRUE(x.is_ok());
        ASSERT_TRUE((*x)->wait_until(Clock::now() + std::chrono::seconds(30)));
        if (++exclusive_in != 1 || shared_in.load() != 0) overlap = true;
        std::this_thread::yield();
        if (shared_in.load() != 0) overlap = true;
        --exclusive_in;
      }
    });
  }
  for (auto& t : jobs)
    t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_LE(most_shared.load(), kMaxShared);
  EXPECT_EQ(gate.status()["grants"], 6 * 15 * 2);
  EXPECT_EQ(gate.status()["exclusive_grants"], 6 * 15);
}

}  // namespace
}  // namespace kforge::workers
