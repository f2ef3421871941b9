// The native worker's phase clock, on a manual clock so every expected value is exact.
#include "kforge/cuda_worker/phase_clock.h"

#include <gtest/gtest.h>

#include <memory>

namespace kforge::cuda_worker {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// A clock the test moves by hand.
struct ManualClock {
  std::shared_ptr<PhaseClock::Clock::time_point> now =
      std::make_shared<PhaseClock::Clock::time_point>();
  PhaseClock::NowFn fn() const {
    return [now = now] { return *now; };
  }
  template <class Duration>
  void advance(Duration d) {
    *now += d;
  }
};

TEST(PhaseClock, NestedScopesAreChargedExclusively) {
  ManualClock time;
  PhaseClock clock(time.fn());
  {
    PhaseClock::Scope timing(clock, "timing");
    time.advance(milliseconds(20));
    {
      PhaseClock::Scope inputs(clock, "inputs");
      time.advance(milliseconds(30));
    }
    time.advance(milliseconds(10));
  }
  time.advance(milliseconds(100));  // outside every phase: charged to none
  EXPECT_EQ(clock.to_json(), (Json{{"inputs", 30.0}, {"timing", 30.0}}));
}

TEST(PhaseClock, PhasesThatNeverRanAreAbsentAndRepeatsAccumulate) {
  ManualClock time;
  PhaseClock clock(time.fn());
  EXPECT_EQ(clock.to_json(), Json::object());
  for (int i = 0; i < 2; ++i) {
    PhaseClock::Scope run(clock, "candidate");
    time.advance(microseconds(1234));
  }
  EXPECT_EQ(clock.to_json(), (Json{{"candidate", 2.468}}));
}

TEST(PhaseClock, AnOpenPhaseCountsUpToNow) {
  ManualClock time;
  PhaseClock clock(time.fn());
  PhaseClock::Scope compile(clock, "compile");
  time.advance(milliseconds(5));
  EXPECT_EQ(clock.to_json(), (Json{{"compile", 5.0}}));
  time.advance(milliseconds(1));
  EXPECT_EQ(clock.to_json(), (Json{{"compile", 6.0}}));
}

TEST(PhaseClock, TheSteadyClockIsTheDefault) {
  PhaseClock clock;
  { PhaseClock::Scope compare(clock, "compare"); }
  ASSERT_TRUE(clock.to_json().contains("compare"));
  EXPECT_GE(clock.to_json()["compare"].get<double>(), 0.0);
}

TEST(PhaseClockDeathTest, AnUnknownPhaseAborts) {
  PhaseClock clock;
  EXPECT_DEATH({ PhaseClock::Scope bad(clock, "launch"); }, "unknown phase launch");
}

}  // namespace
}  // namespace kforge::cuda_worker
