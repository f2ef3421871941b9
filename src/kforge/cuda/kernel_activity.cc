#include "kforge/cuda/kernel_activity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace kforge::cuda {
namespace {

// Python's "{:.4g}".
std::string g4(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

bool exceeds(double value, double reference) {
  return value - reference > std::max(kDisagreeRatio * reference, kDisagreeFloorMs);
}

Json dims_json(const std::optional<std::array<int, 3>>& d) {
  return d ? Json::array({(*d)[0], (*d)[1], (*d)[2]}) : Json(nullptr);
}

template <typename T>
Json optional_json(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

std::string list_json(const std::vector<uint32_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i > 0 ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

}  // namespace

Json DeviceOp::to_json() const {
  return Json{{"name", name},
              {"kind", kind},
              {"grid", dims_json(grid)},
              {"block", dims_json(block)},
              {"duration_ms", duration_us / 1e3},
              {"stream", stream}};
}

double WindowActivity::kernel_time_us() const {
  double total = 0;
  for (const auto& op : ops)
    total += op.duration_us;
  return total;
}

double WindowActivity::busy_us() const {
  std::vector<std::pair<double, double>> intervals;
  intervals.reserve(ops.size());
  for (const auto& op : ops)
    intervals.emplace_back(op.start_us, op.end_us());
  return union_length(std::move(intervals));
}

bool WindowActivity::has_kernel() const {
  return std::any_of(ops.begin(), ops.end(),
                     [](const DeviceOp& op) { return op.kind == "kernel"; });
}

std::vector<uint32_t> WindowActivity::other_streams() const {
  std::set<uint32_t> streams;
  for (const auto& op : ops) {
    if (!launch_stream || op.stream != *launch_stream) streams.insert(op.stream);
  }
  return {streams.begin(), streams.end()};
}

Json KernelActivity::to_json() const {
  Json k = Json::array();
  for (const auto& op : kernels)
    k.push_back(op.to_json());
  Json f = Json::array();
  for (const auto& flag : flags)
    f.push_back(flag.to_json());
  return Json{{"measured", measured},
              {"reason", reason},
              {"source", source},
              {"trials", trials},
              {"kernel_time_ms", optional_json(kernel_time_ms)},
              {"busy_ms", optional_json(busy_ms)},
              {"idle_gap_ms", optional_json(idle_gap_ms)},
              {"event_ms", optional_json(event_ms)},
              {"launch_stream", optional_json(launch_stream)},
              {"kernels", k},
              {"flags", f}};
}

KernelActivity activity_not_measured(std::string reason) {
  KernelActivity a;
  a.reason = std::move(reason);
  return a;
}

double union_length(std::vector<std::pair<double, double>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  double total = 0;
  double end = -std::numeric_limits<double>::infinity();
  for (const auto& [lo, hi] : intervals) {
    if (hi <= end) continue;
    total += hi - std::max(lo, end);
    end = hi;
  }
  return total;
}

std::vector<WindowActivity> windows_from_ops(const std::vector<TaggedOp>& ops, int trials) {
  std::vector<WindowActivity> windows(static_cast<size_t>(std::max(trials, 0)));
  for (int i = 0; i < trials; ++i)
    windows[static_cast<size_t>(i)].trial = i;
  const double inf = std::numeric_limits<double>::infinity();
  std::map<int, double> protocol_start;  // trial -> first start of its flush/spin operations
  std::map<int, double> spin_end;
  std::vector<const DeviceOp*> unowned;
  for (const auto& t : ops) {
    const bool in_range = t.trial >= 0 && t.trial < trials;
    switch (t.owner) {
      case OpOwner::kWindow:
        if (in_range) windows[static_cast<size_t>(t.trial)].ops.push_back(t.op);
        break;
      case OpOwner::kSpin:
        if (in_range) {
          auto& end = spin_end.try_emplace(t.trial, -inf).first->second;
          end = std::max(end, t.op.end_us());
          windows[static_cast<size_t>(t.trial)].launch_stream = t.op.stream;
        }
        [[fallthrough]];
      case OpOwner::kFlush: {
        auto& start = protocol_start.try_emplace(t.trial, inf).first->second;
        start = std::min(start, t.op.start_us);
        break;
      }
      case OpOwner::kUnknown:
        unowned.push_back(&t.op);
        break;
    }
  }
  for (auto& w : windows) {
    double lo = 0;
    if (auto it = spin_end.find(w.trial); it != spin_end.end()) {
      lo = it->second;
    } else if (!w.ops.empty()) {
      lo = std::min_element(w.ops.begin(), w.ops.end(), [](const auto& a, const auto& b) {
             return a.start_us < b.start_us;
           })->start_us;
    } else {
      lo = -inf;
    }
    auto next = protocol_start.find(w.trial + 1);
    const double hi = next != protocol_start.end() ? next->second : inf;
    for (const DeviceOp* op : unowned) {
      if (op->end_us() > lo && op->start_us < hi) w.ops.push_back(*op);
    }
    std::stable_sort(w.ops.begin(), w.ops.end(),
                     [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
    if (!w.launch_stream && !w.ops.empty()) w.launch_stream = w.ops.front().stream;
  }
  return windows;
}

KernelActivity summarize_activity(const std::vector<WindowActivity>& all_windows,
                                  const std::vector<double>& event_ms,
                                  std::optional<double> timed_median_ms, std::string source) {
  if (all_windows.empty()) {
    return activity_not_measured("the profiler recorded no timed window");
  }
  const size_t n =
      event_ms.empty() ? all_windows.size() : std::min(all_windows.size(), event_ms.size());
  std::vector<WindowActivity> windows(all_windows.begin(),
                                      all_windows.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<double> kernel_ms;
  std::vector<double> busy_ms;
  std::vector<double> idle_ms;
  for (size_t i = 0; i < n; ++i) {
    kernel_ms.push_back(windows[i].kernel_time_us() / 1e3);
    busy_ms.push_back(windows[i].busy_us() / 1e3);
    if (i < event_ms.size()) idle_ms.push_back(std::max(0.0, event_ms[i] - busy_ms.back()));
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return kernel_ms[a] < kernel_ms[b]; });
  const WindowActivity& median_window = windows[order[(n - 1) / 2]];

  KernelActivity a;
  a.measured = true;
  a.source = std::move(source);
  a.trials = static_cast<int>(n);
  a.kernel_time_ms = median_of(kernel_ms);
  a.busy_ms = median_of(busy_ms);
  if (!idle_ms.empty()) a.idle_gap_ms = median_of(idle_ms);
  if (!event_ms.empty()) {
    a.event_ms = median_of(
        std::vector<double>(event_ms.begin(), event_ms.begin() + static_cast<std::ptrdiff_t>(n)));
  }
  a.launch_stream = median_window.launch_stream;
  a.kernels = median_window.ops;
  a.flags = activity_flags(windows, a, timed_median_ms);
  return a;
}

std::vector<ActivityFlag> activity_flags(const std::vector<WindowActivity>& windows,
                                         const KernelActivity& a,
                                         std::optional<double> timed_median_ms) {
  std::vector<ActivityFlag> flags;
  const size_t n = windows.size();
  const auto empty = std::count_if(windows.begin(), windows.end(),
                                   [](const WindowActivity& w) { return !w.has_kernel(); });
  if (empty > 0) {
    flags.push_back({"no_kernel", "no kernel was launched in the timed window in " +
                                      std::to_string(empty) + " of " + std::to_string(n) +
                                      " profiled trials: the work, if any, ran on the host, was "
                                      "done before the window, or was not launched by this call"});
  }
  std::set<uint32_t> others;
  for (const auto& w : windows) {
    for (uint32_t s : w.other_streams())
      others.insert(s);
  }
  if (!others.empty()) {
    flags.push_back(
        {"other_streams",
         "device work ran on stream(s) " + list_json({others.begin(), others.end()}) +
             " besides the launch stream " +
             (a.launch_stream ? std::to_string(*a.launch_stream) : std::string("None")) +
             ": the events on the launch stream cover it only if the call joins those streams "
             "before returning"});
  }
  if (a.event_ms && a.busy_ms && exceeds(*a.event_ms, *a.busy_ms)) {
    flags.push_back({"idle_gap", "the device was idle for " + g4(a.idle_gap_ms.value_or(0)) +
                                     " ms of the " + g4(*a.event_ms) +
                                     " ms event window (median of the profiled trials): gaps "
                                     "between kernels, a late first launch or host work inside "
                                     "the call (launch-bound)"});
  }
  if (a.event_ms && a.kernel_time_ms && exceeds(*a.kernel_time_ms, *a.event_ms)) {
    flags.push_back({"kernel_time_exceeds_event",
                     "the kernels' summed device time " + g4(*a.kernel_time_ms) +
                         " ms exceeds the event time " + g4(*a.event_ms) +
                         " ms: kernels overlapped on several streams or ran past the end event"});
  }
  if (a.event_ms && timed_median_ms &&
      std::fabs(*a.event_ms - *timed_median_ms) >
          std::max(kProfilerOverheadRatio * *timed_median_ms, kDisagreeFloorMs)) {
    flags.push_back({"profiler_overhead",
                     "the profiled trials' event median " + g4(*a.event_ms) +
                         " ms differs from the timed trials' " + g4(*timed_median_ms) +
                         " ms: the activity describes different trials than the headline"});
  }
  return flags;
}

}  // namespace kforge::cuda
