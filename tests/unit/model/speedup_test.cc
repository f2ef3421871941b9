#include "kforge/model/speedup.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kforge::model {
namespace {

TEST(SpeedupModelTest, SystematicErrorIsTheDevicesOwn) {
  EXPECT_EQ(systematic_error("cpu"), kCpuSystematic);
  EXPECT_EQ(systematic_error("cuda:1"), kGpuSystematic);
  EXPECT_EQ(systematic_error("cuda"), kGpuSystematic);
}

TEST(SpeedupModelTest, IdenticalTimesAreIndistinguishableEvenWithNoSpread) {
  const auto t = TimeEstimate::of_median(0.5, 0.0, 40);
  const SpeedupInterval ci = ratio_interval(t, t, systematic_error("cuda:0"));
  EXPECT_NEAR(ci.low, 0.97, 1e-9);
  EXPECT_NEAR(ci.high, 1.03, 1e-9);
  EXPECT_EQ(speedup_verdict(ci), "indistinguishable");
}

TEST(SpeedupModelTest, TheSpreadOfBothSidesWidensTheInterval) {
  const auto a = TimeEstimate::of_median(2.0, 0.4, 16);  // se = 1.2533 * 0.4 / 4
  EXPECT_NEAR(a.se_ms, 0.12533, 1e-5);
  const auto b = TimeEstimate::of_mean(1.0, 0.0, 16);
  const SpeedupInterval wide = ratio_interval(a, b, 0.0);
  EXPECT_LT(wide.low, 2.0);
  EXPECT_GT(wide.high, 2.0);
  // 16 trials: Student's t for 15 degrees of freedom, not the normal quantile.
  EXPECT_NEAR(std::log(wide.high / 2.0), 2.131 * 0.12533 / 2.0, 1e-4);
  EXPECT_EQ(speedup_verdict(wide), "faster");
  EXPECT_EQ(speedup_verdict(ratio_interval(b, a, 0.0)), "slower");
  EXPECT_EQ(speedup_verdict(std::nullopt), "");
}

TEST(SpeedupModelTest, FewTrialsWidenTheIntervalAndOneTrialBoundsNothing) {
  // Three trials a side: t = 4.303 for 2 degrees of freedom, more than twice the normal 1.96.
  const auto a = TimeEstimate::of_mean(1.2, 0.1, 3);
  const auto b = TimeEstimate::of_mean(1.0, 0.0, 3);
  const SpeedupInterval few = ratio_interval(a, b, 0.0);
  EXPECT_NEAR(std::log(1.2 / few.low), 4.303 * (0.1 / std::sqrt(3.0)) / 1.2, 1e-4);
  EXPECT_EQ(speedup_verdict(few), "indistinguishable");  // 1.2 within its wide interval
  // A difference far beyond the spread still reads as one with few trials.
  EXPECT_EQ(speedup_verdict(ratio_interval(TimeEstimate::of_mean(500.0, 1.0, 3), b, 0.1)),
            "faster");
  // One trial: no spread known, an unbounded interval, never faster or slower.
  const SpeedupInterval one = ratio_interval(TimeEstimate::of_mean(500.0, 0.0, 1), b, 0.0);
  EXPECT_TRUE(one.covers(1.0));
  EXPECT_EQ(speedup_verdict(one), "indistinguishable");
  EXPECT_TRUE(one.to_json().is_null());
}

TEST(SpeedupModelTest, MeansCarryTheirPartsErrorsAndFewestTrials) {
  const std::vector<TimeEstimate> parts = {{1.0, 0.1, 10}, {4.0, 0.4, 20}};
  const auto g = geometric_mean(parts);
  ASSERT_TRUE(g.has_value());
  EXPECT_NEAR(g->ms, 2.0, 1e-12);
  EXPECT_NEAR(g->se_ms / g->ms, std::sqrt(0.01 + 0.01) / 2.0, 1e-12);
  EXPECT_EQ(g->trials, 10);
  const auto m = arithmetic_mean(parts);
  ASSERT_TRUE(m.has_value());
  EXPECT_NEAR(m->ms, 2.5, 1e-12);
  EXPECT_NEAR(m->se_ms, std::sqrt(0.01 + 0.16) / 2.0, 1e-12);
  EXPECT_FALSE(geometric_mean({}).has_value());
  EXPECT_FALSE(arithmetic_mean({{0.0, 0.0, 5}}).has_value());
}

TEST(SpeedupModelTest, EstimatesReadFromTimingSummaries) {
  const Json timing = {{"median_ms", 0.25}, {"mean_ms", 0.3}, {"std_ms", 0.05}, {"trials", 25}};
  const auto median = TimeEstimate::from_json(timing, "median_ms");
  ASSERT_TRUE(median.has_value());
  EXPECT_NEAR(median->se_ms, 1.2533 * 0.05 / 5.0, 1e-9);
  EXPECT_EQ(median->trials, 25);
  const auto mean = TimeEstimate::from_json(timing, "mean_ms");
  ASSERT_TRUE(mean.has_value());
  EXPECT_NEAR(mean->se_ms, 0.01, 1e-12);
  EXPECT_FALSE(TimeEstimate::from_json(Json{{"median_ms", 0.0}}, "median_ms").has_value());
  EXPECT_FALSE(TimeEstimate::from_json(Json(nullptr), "median_ms").has_value());
  // No std or trials: a point estimate with 0 trials (never faster/slower).
  const auto bare = TimeEstimate::from_json(Json{{"median_ms", 1.0}}, "median_ms");
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->se_ms, 0.0);
  EXPECT_EQ(bare->trials, 0);
}

}  // namespace
}  // namespace kforge::model
