// Spin sizing and the timing loop's warnings (the same bounds as the Python worker's
// timing/timing.py and timing/stats.py).
#include "kforge/cuda/timing_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kforge::cuda {
namespace {

TEST(TimingStatsTest, SpinCoversTheMeasuredEnqueueWithinFloorAndCap) {
  EXPECT_EQ(spin_us_for(0.0), std::max(kSpinFloorUs, kSpinMarginUs));
  EXPECT_DOUBLE_EQ(spin_us_for(0.020), 40.0);  // 1.5 x 20 us + 10 us
  EXPECT_EQ(spin_us_for(1e6), kSpinCapUs);
  EXPECT_EQ(spin_us_for(std::numeric_limits<double>::quiet_NaN()), kSpinCapUs);
  EXPECT_EQ(spin_us_for(-1.0), kSpinCapUs);
}

TEST(TimingStatsTest, SpinGrowsAfterAnUncoveredTrialAndStopsAtTheCap) {
  EXPECT_EQ(next_spin_us(40.0, 0.010), 80.0);
  EXPECT_DOUBLE_EQ(next_spin_us(40.0, 0.200), 310.0);
  EXPECT_EQ(next_spin_us(kSpinCapUs / 1.5, 0.0), kSpinCapUs);
  EXPECT_EQ(next_spin_us(kSpinCapUs, 10.0), kSpinCapUs);
}

TEST(TimingStatsTest, LaunchNotHiddenOnlyBeyondTheDocumentedFraction) {
  EXPECT_EQ(launch_not_hidden_message(0, 100, 0.02), "");
  EXPECT_EQ(launch_not_hidden_message(10, 100, 0.02), "");
  EXPECT_EQ(launch_not_hidden_message(11, 100, 0.02).rfind("launch not hidden: in 11 of 100", 0),
            0u);
  EXPECT_EQ(launch_not_hidden_message(0, 0, 0.02), "");
}

TEST(TimingStatsTest, StreamSkewBound) {
  EXPECT_EQ(stream_skew_message(0.149, 0.1), "");
  EXPECT_NE(stream_skew_message(0.2, 0.1).find("outside the launch stream"), std::string::npos);
  EXPECT_EQ(stream_skew_message(1.49, 1.0), "");
  EXPECT_NE(stream_skew_message(1.51, 1.0), "");
}

TEST(TimingStatsTest, JsonHasTheSpinFieldsAsNullUntilSet) {
  TimingStats s = compute_stats({1.0, 2.0}, "cuda_event");
  Json j = s.to_json();
  EXPECT_TRUE(j["spin_us"].is_null() && j["enqueue_ms"].is_null());
  EXPECT_TRUE(j["launch_not_hidden_trials"].is_null());
  s.spin_us = 40;
  s.enqueue_ms = 0.02;
  s.launch_not_hidden_trials = 0;
  j = s.to_json();
  EXPECT_EQ(j["spin_us"], 40.0);
  EXPECT_EQ(j["launch_not_hidden_trials"], 0);
}

TEST(TimingStatsTest, WindowOverheadComesOffEveryLocationStatisticDownToTheFloor) {
  const TimingStats raw = compute_stats({0.004, 0.005, 0.006, 0.020}, "cuda_event");
  const TimingStats s = without_window_overhead(raw, 0.0038);
  EXPECT_DOUBLE_EQ(s.median, raw.median - 0.0038);
  EXPECT_DOUBLE_EQ(s.mean, raw.mean - 0.0038);
  EXPECT_DOUBLE_EQ(s.max, raw.max - 0.0038);
  EXPECT_DOUBLE_EQ(s.min, kEventResolutionMs);  // 0.004 - 0.0038 is below what events resolve
  EXPECT_DOUBLE_EQ(s.std, raw.std);
  EXPECT_DOUBLE_EQ(s.rse, raw.rse);
  EXPECT_DOUBLE_EQ(*s.event_median, raw.median);
  const Json j = s.to_json();
  EXPECT_DOUBLE_EQ(j["window_overhead_us"].get<double>(), 3.8);
  EXPECT_TRUE(raw.to_json()["window_overhead_us"].is_null());
}

TEST(TimingStatsTest, PercentilesInterpolateBetweenClosestRanks) {
  const std::vector<double> v = {1.0, 2.0, 4.0, 8.0};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 8.0);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3.0);  // halfway between 2 and 4
  EXPECT_DOUBLE_EQ(percentile(v, 25), 1.75);
  EXPECT_DOUBLE_EQ(percentile({5.0}, 99), 5.0);
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
}

TEST(TimingStatsTest, NoSamplesGiveEmptyStatsNotACrash) {
  const TimingStats s = compute_stats({}, "cuda_event");
  EXPECT_EQ(s.trials, 0);
  EXPECT_EQ(s.method, "cuda_event");
  const TimingStats one = compute_stats({2.0}, "cpu_wall_clock");
  EXPECT_EQ(one.trials, 1);
  EXPECT_EQ(one.std, 0.0);
  EXPECT_EQ(one.rse, 0.0);  // reported as 0 with one sample; the stop rule sees infinity
  EXPECT_TRUE(std::isinf(relative_standard_error({2.0})));
}

TEST(TimingStatsTest, StopRuleOrder) {
  model::TimingOptions o;
  o.min_trials = 3;
  o.max_trials = 5;
  o.budget_ms = 100;
  o.rse_target = 0.01;
  EXPECT_EQ(stop_reason({1, 1}, o, 1000), "");  // min_trials first, even past the budget
  EXPECT_EQ(stop_reason({1, 9, 1, 9, 1}, o, 1000), "max_trials");
  EXPECT_EQ(stop_reason({1, 9, 1}, o, 100), "budget");
  EXPECT_EQ(stop_reason({1, 1, 1}, o, 0), "rse_target");
  EXPECT_EQ(stop_reason({1, 9, 1}, o, 0), "");
}

TEST(TimingStatsTest, JsonCarriesEveryRuntimeStatsField) {
  TimingStats s = compute_stats({1.0, 2.0, 3.0}, "cuda_graph");
  s.l2_flush = true;
  s.warmup_calls = 4;
  s.stop_reason = "rse_target";
  s.device_sync_median = 2.5;
  const Json j = s.to_json();
  EXPECT_EQ(j["unit"], "ms");
  EXPECT_EQ(j["method"], "cuda_graph");
  EXPECT_EQ(j["trials"], 3);
  EXPECT_DOUBLE_EQ(j["median"].get<double>(), 2.0);
  EXPECT_EQ(j["l2_flush"], true);
  EXPECT_EQ(j["warmup_calls"], 4);
  EXPECT_EQ(j["stop_reason"], "rse_target");
  EXPECT_EQ(j["device_sync_median"], 2.5);
  for (const char* key : {"mean", "std", "min", "max", "percentile_5", "percentile_95",
                          "percentile_99", "rse", "event_median", "window_overhead_us"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
}

}  // namespace
}  // namespace kforge::cuda

namespace kforge::cuda {
namespace {

TEST(SpeedupIntervalTest, IdenticalSamplesAreIndistinguishable) {
  std::vector<double> a = {1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01};
  auto interval = speedup_interval(a, a, 7);
  ASSERT_TRUE(interval.has_value());
  EXPECT_LT(interval->low, 1.0);
  EXPECT_GT(interval->high, 1.0);
  EXPECT_EQ(model::speedup_verdict(interval), "indistinguishable");
  // The same seed gives the same interval (a result can be computed again).
  auto again = speedup_interval(a, a, 7);
  EXPECT_EQ(again->low, interval->low);
  EXPECT_EQ(again->high, interval->high);
}

TEST(SpeedupIntervalTest, AClearlyFasterCandidateIsFaster) {
  std::vector<double> ref = {2.0, 2.02, 1.98, 2.01, 1.99, 2.0};
  std::vector<double> cand = {1.0, 1.01, 0.99, 1.0, 1.02, 0.98};
  auto interval = speedup_interval(ref, cand, 1);
  ASSERT_TRUE(interval.has_value());
  EXPECT_GT(interval->low, 1.8);
  EXPECT_EQ(model::speedup_verdict(interval), "faster");
  EXPECT_EQ(model::speedup_verdict(speedup_interval(cand, ref, 1)), "slower");
  // Widened by the systematic 3 % on each side.
  EXPECT_LT(interval->low, 2.0 * (1 - model::kGpuSystematic) + 0.05);
  EXPECT_FALSE(speedup_interval({1.0}, cand, 1).has_value());
  EXPECT_EQ(model::speedup_verdict(std::nullopt), "");
}

TEST(SpeedupIntervalTest, IdenticalFewMicrosecondKernelsCoverOneThroughTheirPathsBias) {
  // As an H200 read one Triton add of 2^20 elements as candidate and reference: 5.82 us
  // against 5.44, each side's trials tight. Three percent would not cover 1; the paths'
  // absolute bias does. At 500 us the same bias is nothing.
  const std::vector<double> cand = {0.00580, 0.00582, 0.00583, 0.00581, 0.00584, 0.00582};
  const std::vector<double> ref = {0.00543, 0.00544, 0.00545, 0.00544, 0.00543, 0.00545};
  const auto small = speedup_interval(ref, cand, 3);
  ASSERT_TRUE(small.has_value());
  EXPECT_TRUE(small->covers(1.0)) << small->low << " " << small->high;
  EXPECT_LT(small->low, 0.95 * (1 - model::kGpuSystematic));
  std::vector<double> big_cand, big_ref;
  for (double v : cand)
    big_cand.push_back(v * 100);
  for (double v : ref)
    big_ref.push_back(v * 100);
  EXPECT_EQ(model::speedup_verdict(speedup_interval(big_ref, big_cand, 3)), "slower");
  const auto unbounded = model::widened_by_time({0.9, 1.1}, 1.0, 0.0002, 0.00025);
  EXPECT_TRUE(std::isinf(unbounded.high));
  EXPECT_EQ(model::widened_by_time({0.9, 1.1}, 1.0, 1.0, 0.0).low, 0.9);
}

TEST(SpeedupIntervalTest, FewTrialsGiveTheRangeOfTrialRatios) {
  // Three trials a side: the interval is [min ref / max cand, max ref / min cand], widened.
  const std::vector<double> ref = {0.09, 0.10, 0.12};
  const std::vector<double> cand = {44.0, 45.0, 46.0};
  const auto slow = speedup_interval(ref, cand, 1);
  ASSERT_TRUE(slow.has_value());
  // ... and by kGpuSystematicMs in each side's median (0.10 and 45.0 ms).
  constexpr double a_ms = model::kGpuSystematicMs;
  EXPECT_NEAR(slow->low,
              0.09 / 46.0 * (1 - model::kGpuSystematic) * (1 - a_ms / 0.10) / (1 + a_ms / 45.0),
              1e-12);
  EXPECT_NEAR(slow->high,
              0.12 / 44.0 * (1 + model::kGpuSystematic) * (1 + a_ms / 0.10) / (1 - a_ms / 45.0),
              1e-12);
  EXPECT_EQ(model::speedup_verdict(slow), "slower");  // 500x slower is slower at any count
  // Overlapping trials cover 1: identical kernels with few trials are a tie.
  const std::vector<double> a = {1.0, 1.02, 0.99};
  const std::vector<double> b = {1.01, 0.98, 1.0};
  EXPECT_EQ(model::speedup_verdict(speedup_interval(a, b, 1)), "indistinguishable");
}

}  // namespace
}  // namespace kforge::cuda
