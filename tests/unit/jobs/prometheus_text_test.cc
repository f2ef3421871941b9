#include "kforge/jobs/prometheus_text.h"

#include <gtest/gtest.h>

#include <limits>

namespace kforge::jobs {
namespace {

TEST(PrometheusText, FamiliesAndSamplesInTheTextFormat) {
  PrometheusText out;
  out.family("kforge_queue_depth", "gauge", "Jobs waiting for a device.");
  out.sample("kforge_queue_depth", {}, 3);
  out.family("kforge_device_busy_seconds_total", "counter", "Busy time.");
  out.sample("kforge_device_busy_seconds_total", {{"device", "cuda:0"}, {"kind", "gpu"}}, 1.25);
  EXPECT_EQ(out.text(),
            "# HELP kforge_queue_depth Jobs waiting for a device.\n"
            "# TYPE kforge_queue_depth gauge\n"
            "kforge_queue_depth 3\n"
            "# HELP kforge_device_busy_seconds_total Busy time.\n"
            "# TYPE kforge_device_busy_seconds_total counter\n"
            "kforge_device_busy_seconds_total{device=\"cuda:0\",kind=\"gpu\"} 1.25\n");
}

TEST(PrometheusText, LabelValuesAreEscaped) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  PrometheusText out;
  out.sample("m", {{"version", "1.0 \"beta\""}}, 1);
  EXPECT_EQ(out.text(), "m{version=\"1.0 \\\"beta\\\"\"} 1\n");
}

TEST(PrometheusText, NonFiniteValuesUseTheFormatsNames) {
  PrometheusText out;
  out.sample("a", {}, std::numeric_limits<double>::infinity());
  out.sample("b", {}, -std::numeric_limits<double>::infinity());
  out.sample("c", {}, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(out.text(), "a +Inf\nb -Inf\nc NaN\n");
}

TEST(PrometheusText, HistogramBucketsAreCumulativeWithInfLast) {
  const std::vector<double> bounds = {0.01, 0.1, 1};
  HistogramData h;
  for (double v : {0.005, 0.05, 0.05, 0.5, 7.0})
    h.observe(bounds, v);
  EXPECT_EQ(h.count, 5);
  EXPECT_EQ(h.overflow, 1);
  PrometheusText out;
  out.histogram("lat_seconds", {{"phase", "timing"}}, bounds, h);
  EXPECT_EQ(out.text(),
            "lat_seconds_bucket{phase=\"timing\",le=\"0.01\"} 1\n"
            "lat_seconds_bucket{phase=\"timing\",le=\"0.1\"} 3\n"
            "lat_seconds_bucket{phase=\"timing\",le=\"1\"} 4\n"
            "lat_seconds_bucket{phase=\"timing\",le=\"+Inf\"} 5\n"
            "lat_seconds_sum{phase=\"timing\"} 7.605\n"
            "lat_seconds_count{phase=\"timing\"} 5\n");
}

TEST(PrometheusText, AnEmptyHistogramHasZeroBuckets) {
  PrometheusText out;
  out.histogram("h", {}, {1.0}, HistogramData{});
  EXPECT_EQ(out.text(), "h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n");
}

}  // namespace
}  // namespace kforge::jobs
