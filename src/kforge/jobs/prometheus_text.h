// The Prometheus text exposition format (version 0.0.4), written by hand: metric families
// with their HELP and TYPE lines, samples with escaped label values, and histograms with
// cumulative `le` buckets. `promtool check metrics` accepts what it writes.
//
// Not thread-safe: build one per scrape.
//
// Example:
//   PrometheusText out;
//   out.family("kforge_queue_depth", "gauge", "Jobs waiting for a device.");
//   out.sample("kforge_queue_depth", {}, 3);
//   std::string body = out.text();  // served as kPrometheusContentType
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kforge::jobs {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

using Labels = std::vector<std::pair<std::string, std::string>>;

// A histogram's state: per-bucket counts (not cumulative) for `bounds`, plus the overflow.
struct HistogramData {
  std::vector<int64_t> counts;  // counts[i]: observations <= bounds[i] and > bounds[i-1]
  int64_t overflow = 0;         // observations above the last bound
  double sum = 0;
  int64_t count = 0;

  // Adds one observation; `bounds` must be the ones the histogram is written with.
  void observe(const std::vector<double>& bounds, double value);
};

class PrometheusText {
 public:
  // Starts a family: `# HELP` and `# TYPE` lines. `type` is counter, gauge or histogram.
  void family(std::string_view name, std::string_view type, std::string_view help);
  // One sample line `name{labels} value`.
  void sample(std::string_view name, const Labels& labels, double value);
  // The _bucket (cumulative, le="+Inf" last), _sum and _count lines of one histogram.
  void histogram(std::string_view name, const Labels& labels, const std::vector<double>& bounds,
                 const HistogramData& data);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// `value` with backslash, double quote and newline escaped, as label values need.
std::string escape_label_value(std::string_view value);

}  // namespace kforge::jobs
