#include "kforge/cuda_worker/phase_clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace kforge::cuda_worker {
namespace {

using std::chrono::milliseconds;

TEST(PhaseClock, NestedScopesAreChargedExclusively) {
  PhaseClock clock;
  const auto started = std::chrono::steady_clock::now();
  {
    PhaseClock::Scope timing(clock, "timing");
    std::this_thread::sleep_for(milliseconds(10));
    {
      PhaseClock::Scope inputs(clock, "inputs");
      std::this_thread::sleep_for(milliseconds(20));
    }
  }
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  Json ms = clock.to_json();
  ASSERT_EQ(ms.size(), 2U);
  EXPECT_GE(ms["inputs"].get<double>(), 20.0);
  EXPECT_GE(ms["timing"].get<double>(), 10.0);
  EXPECT_LT(ms["timing"].get<double>(), 20.0);  // the inner scope is not charged to it
  EXPECT_LE(ms["inputs"].get<double>() + ms["timing"].get<double>(), wall_ms + 0.01);
}

TEST(PhaseClock, PhasesThatNeverRanAreAbsentAndRepeatsAccumulate) {
  PhaseClock clock;
  EXPECT_EQ(clock.to_json(), Json::object());
  for (int i = 0; i < 2; ++i) {
    PhaseClock::Scope run(clock, "candidate");
    std::this_thread::sleep_for(milliseconds(5));
  }
  Json ms = clock.to_json();
  EXPECT_EQ(ms.size(), 1U);
  EXPECT_GE(ms["candidate"].get<double>(), 10.0);
  EXPECT_FALSE(ms.contains("compile"));
}

TEST(PhaseClock, AnOpenPhaseCountsUpToNow) {
  PhaseClock clock;
  PhaseClock::Scope compile(clock, "compile");
  std::this_thread::sleep_for(milliseconds(5));
  EXPECT_GE(clock.to_json()["compile"].get<double>(), 5.0);
}

TEST(PhaseClockDeathTest, AnUnknownPhaseAborts) {
  PhaseClock clock;
  EXPECT_DEATH({ PhaseClock::Scope bad(clock, "launch"); }, "unknown phase launch");
}

}  // namespace
}  // namespace kforge::cuda_worker
