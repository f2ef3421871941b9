// Teardowns: a job's processes end after its answer went out, and the device ticket it held
// goes back only once they are gone.
#include "kforge/workers/teardowns.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kforge::workers {
namespace {

using Mode = DeviceGate::Mode;
using std::chrono::milliseconds;

// A place in `gate`'s queue (granted at once when the device is free).
std::unique_ptr<DeviceGate::Ticket> place_in(DeviceGate& gate, const std::string& holder,
                                             Mode mode = Mode::kExclusive) {
  return std::move(gate.request(holder, mode)).value();
}

TEST(TeardownsTest, TheTicketGoesBackOnlyOnceTheProcessesAreGone) {
  DeviceGate gate("cuda:0");
  auto held = place_in(gate, "job-a");
  ASSERT_TRUE(held->granted());
  std::promise<void> gone;
  std::shared_future<void> gone_future = gone.get_future().share();
  Teardowns teardowns;
  teardowns.add({[gone_future] { gone_future.wait(); }, std::move(held)});
  auto next = place_in(gate, "job-b");
  EXPECT_FALSE(next->wait_until(std::chrono::steady_clock::now() + milliseconds(100)))
      << "the next job was granted the device while the last one's processes were ending";
  EXPECT_EQ(teardowns.status()["pending"], 1);
  gone.set_value();
  EXPECT_TRUE(next->wait_until(std::chrono::steady_clock::now() + milliseconds(5000)));
  teardowns.drain();
  Json status = teardowns.status();
  EXPECT_EQ(status["pending"], 0);
  EXPECT_EQ(status["done"], 1);
  EXPECT_GE(status["max_ms"].get<double>(), 90.0);
}

TEST(TeardownsTest, WhatTheEndHoldsIsDestroyedAfterTheTicketIsBack) {
  DeviceGate gate("cuda:0");
  auto held = place_in(gate, "job-a");
  auto next = place_in(gate, "job-b");
  // The child's remains (its cgroup and scratch directory): destroyed last, off the device.
  struct Remains {
    Remains(DeviceGate::Ticket* n, std::atomic<int>* s) : next(n), seen(s) {}
    Remains(const Remains&) = delete;
    Remains& operator=(const Remains&) = delete;
    ~Remains() { *seen = next->granted() ? 1 : 2; }
    DeviceGate::Ticket* next;
    std::atomic<int>* seen;  // 0: not destroyed, 1: destroyed with the ticket back, 2: before
  };
  std::atomic<int> seen = 0;
  auto remains = std::make_shared<Remains>(next.get(), &seen);
  {
    Teardowns teardowns;
    teardowns.add({[remains] { (void)remains; }, std::move(held)});
    remains.reset();
    teardowns.drain();
  }
  EXPECT_EQ(seen, 1)
      << "0: the child was never destroyed; 2: destroyed before the ticket went back";
}

TEST(TeardownsTest, TheDestructorFinishesEveryPendingTeardown) {
  std::atomic<int> ended = 0;
  {
    Teardowns teardowns;
    for (int i = 0; i < 5; ++i) {
      teardowns.add({[&ended] {
                       std::this_thread::sleep_for(milliseconds(10));
                       ++ended;
                     },
                     nullptr});
    }
  }
  EXPECT_EQ(ended, 5);
}

TEST(TeardownsTest, ATeardownTicketIsWhatTheJobHeldElseASharedPlaceInTheQueue) {
  DeviceGate gate("cuda:0");
  auto held = place_in(gate, "job-a");
  DeviceGate::Ticket* raw = held.get();
  auto kept = teardown_ticket(std::move(held), &gate, "job-a");
  EXPECT_EQ(kept.get(), raw) << "the job's own grant is the one kept";
  kept.reset();

  EXPECT_EQ(teardown_ticket(nullptr, nullptr, "job-b"), nullptr) << "no gate, nothing to hold";

  auto shared = teardown_ticket(nullptr, &gate, "job-c");
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->mode(), Mode::kShared);
  EXPECT_TRUE(shared->granted());
  auto correctness = place_in(gate, "job-d", Mode::kShared);  // may overlap a teardown...
  auto timed = place_in(gate, "job-e", Mode::kExclusive);     // ...a timed region may not
  EXPECT_FALSE(timed->granted());
  shared.reset();
  correctness.reset();
  EXPECT_TRUE(timed->wait_until(std::chrono::steady_clock::now() + milliseconds(5000)));
}

}  // namespace
}  // namespace kforge::workers
