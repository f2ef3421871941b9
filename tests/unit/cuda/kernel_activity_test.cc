// The native worker's kernel activity: attribution of tagged CUPTI records to windows and
// the flags, on synthetic records (the same cases as tests/python/test_activity.py).
#include "kforge/cuda/kernel_activity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace kforge::cuda {
namespace {

constexpr uint32_t kLaunch = 7;
constexpr uint32_t kSide = 13;

DeviceOp op(const std::string& name, double start, double dur, uint32_t stream = kLaunch) {
  DeviceOp o;
  o.name = name;
  o.grid = std::array<int, 3>{4, 1, 1};
  o.block = std::array<int, 3>{128, 1, 1};
  o.stream = stream;
  o.start_us = start;
  o.duration_us = dur;
  return o;
}

// flush at t0+10 (30 us), spin at t0+105 ending at t0+150, then the window's kernels.
void trial(std::vector<TaggedOp>& ops, int index, double t0,
           const std::vector<std::pair<double, double>>& kernels) {
  ops.push_back({op("kforge_l2_read", t0 + 10, 30), OpOwner::kFlush, index});
  ops.push_back({op("kforge_spin", t0 + 105, 45), OpOwner::kSpin, index});
  for (const auto& [start, dur] : kernels) {
    ops.push_back({op("add", t0 + 150 + start, dur), OpOwner::kWindow, index});
  }
}

std::vector<std::string> names(const WindowActivity& w) {
  std::vector<std::string> out;
  for (const auto& o : w.ops)
    out.push_back(o.name);
  return out;
}

std::vector<std::string> codes(const KernelActivity& a) {
  std::vector<std::string> out;
  for (const auto& f : a.flags)
    out.push_back(f.code);
  return out;
}

WindowActivity window(int trial, std::vector<DeviceOp> ops) {
  WindowActivity w;
  w.trial = trial;
  w.ops = std::move(ops);
  w.launch_stream = kLaunch;
  return w;
}

TEST(KernelActivityTest, UnionLengthMergesOverlaps) {
  EXPECT_EQ(union_length({}), 0);
  EXPECT_EQ(union_length({{0, 2}, {1, 3}, {5, 6}}), 4);
  EXPECT_EQ(union_length({{0, 10}, {2, 3}}), 10);
}

TEST(KernelActivityTest, WindowsHoldOnlyTheCallsKernels) {
  std::vector<TaggedOp> ops;
  trial(ops, 0, 0, {{1, 6}});
  trial(ops, 1, 1000, {{1, 7}});
  auto windows = windows_from_ops(ops, 2);
  ASSERT_EQ(windows.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(names(windows[i]), std::vector<std::string>{"add"});
    EXPECT_EQ(windows[i].launch_stream, kLaunch);
    EXPECT_EQ(windows[i].ops[0].duration_us, 6 + i);
  }
}

TEST(KernelActivityTest, UntaggedOperationsAreAttributedByTime) {
  std::vector<TaggedOp> ops;
  trial(ops, 0, 0, {{1, 6}});
  ops.push_back({op("device_launched", 170, 5, kSide), OpOwner::kUnknown, -1});
  trial(ops, 1, 1000, {{1, 6}});
  ops.push_back({op("early", 0, 2, kSide), OpOwner::kUnknown, -1});
  auto windows = windows_from_ops(ops, 2);
  EXPECT_EQ(names(windows[0]), (std::vector<std::string>{"add", "device_launched"}));
  EXPECT_EQ(names(windows[1]), std::vector<std::string>{"add"});
  EXPECT_EQ(windows[0].other_streams(), std::vector<uint32_t>{kSide});
}

TEST(KernelActivityTest, SingleKernelAgreeingWithEventsHasNoFlags) {
  std::vector<WindowActivity> windows;
  for (int i = 0; i < 5; ++i)
    windows.push_back(window(i, {op("add", 0, 10.0 + i)}));
  auto a = summarize_activity(windows, {0.0115, 0.0121, 0.0130, 0.0140, 0.0150}, 0.013, "t");
  ASSERT_TRUE(a.measured);
  EXPECT_EQ(a.trials, 5);
  EXPECT_NEAR(*a.kernel_time_ms, 0.012, 1e-12);
  EXPECT_EQ(a.kernels.at(0).duration_us, 12.0);
  EXPECT_NEAR(*a.idle_gap_ms, 0.001, 1e-12);
  EXPECT_TRUE(a.flags.empty());
  const Json k = a.to_json()["kernels"][0];
  EXPECT_EQ(k, (Json{{"name", "add"},
                     {"kind", "kernel"},
                     {"grid", {4, 1, 1}},
                     {"block", {128, 1, 1}},
                     {"duration_ms", 0.012},
                     {"stream", kLaunch}}));
}

TEST(KernelActivityTest, LaunchBoundMultiKernelIsFlaggedIdle) {
  auto a = summarize_activity({window(0, {op("a", 0, 5), op("b", 25, 5), op("c", 50, 5)})}, {0.060},
                              0.060, "t");
  EXPECT_NEAR(*a.kernel_time_ms, 0.015, 1e-12);
  EXPECT_NEAR(*a.idle_gap_ms, 0.045, 1e-12);
  EXPECT_EQ(codes(a), std::vector<std::string>{"idle_gap"});
}

TEST(KernelActivityTest, IdleGapBelowTheFloorIsNotFlagged) {
  auto a = summarize_activity({window(0, {op("a", 0, 2)})}, {0.005}, 0.005, "t");
  EXPECT_LT(*a.idle_gap_ms, kDisagreeFloorMs);
  EXPECT_TRUE(a.flags.empty());
}

TEST(KernelActivityTest, NoKernelIsFlagged) {
  auto a =
      summarize_activity({window(0, {}), window(1, {op("a", 0, 5)})}, {0.004, 0.006}, 0.005, "t");
  ASSERT_FALSE(a.flags.empty());
  EXPECT_EQ(a.flags[0].code, "no_kernel");
  EXPECT_NE(a.flags[0].message.find("1 of 2 profiled trials"), std::string::npos);
}

TEST(KernelActivityTest, SideStreamWorkIsFlaggedAndOverlapExceedsEvent) {
  auto a = summarize_activity(
      {window(0, {op("a", 0, 100), op("b", 0, 100, kSide), op("c", 0, 100, kSide + 1)})}, {0.101},
      0.101, "t");
  EXPECT_EQ(codes(a), (std::vector<std::string>{"other_streams", "kernel_time_exceeds_event"}));
  EXPECT_NE(a.flags[0].message.find("[13, 14] besides the launch stream 7"), std::string::npos);
}

TEST(KernelActivityTest, ProfilerOverheadIsFlagged) {
  auto a = summarize_activity({window(0, {op("a", 0, 100)})}, {0.2}, 0.1, "t");
  const auto c = codes(a);
  EXPECT_NE(std::find(c.begin(), c.end(), "profiler_overhead"), c.end());
}

TEST(KernelActivityTest, NoWindowsIsNotMeasured) {
  auto a = summarize_activity({}, {0.1}, 0.1, "t");
  EXPECT_FALSE(a.measured);
  const Json j = a.to_json();
  EXPECT_TRUE(j["kernel_time_ms"].is_null());
  EXPECT_EQ(j["kernels"], Json::array());
  EXPECT_EQ(activity_not_measured(kNotMeasuredOnCpu).to_json()["reason"], "not measured on cpu");
}

}  // namespace
}  // namespace kforge::cuda
