#include "kforge/jobs/prometheus_text.h"

#include <fmt/format.h>

#include <cmath>

namespace kforge::jobs {
namespace {

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return fmt::format("{}", static_cast<int64_t>(value));
  }
  return fmt::format("{}", value);
}

void append_labels(std::string& out, const Labels& labels) {
  if (labels.empty()) return;
  out += '{';
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out += ',';
    first = false;
    out += name;
    out += "=\"";
    out += escape_label_value(value);
    out += '"';
  }
  out += '}';
}

}  // namespace

void HistogramData::observe(const std::vector<double>& bounds, double value) {
  if (counts.size() != bounds.size()) counts.assign(bounds.size(), 0);
  sum += value;
  ++count;
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (value <= bounds[i]) {
      ++counts[i];
      return;
    }
  }
  ++overflow;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void PrometheusText::family(std::string_view name, std::string_view type, std::string_view help) {
  text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PrometheusText::sample(std::string_view name, const Labels& labels, double value) {
  text_ += name;
  append_labels(text_, labels);
  text_ += ' ';
  text_ += format_value(value);
  text_ += '\n';
}

void PrometheusText::histogram(std::string_view name, const Labels& labels,
                               const std::vector<double>& bounds, const HistogramData& data) {
  const std::string bucket = std::string(name) + "_bucket";
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    cumulative += i < data.counts.size() ? data.counts[i] : 0;
    Labels with_le = labels;
    with_le.emplace_back("le", format_value(bounds[i]));
    sample(bucket, with_le, static_cast<double>(cumulative));
  }
  Labels with_le = labels;
  with_le.emplace_back("le", "+Inf");
  sample(bucket, with_le, static_cast<double>(data.count));
  sample(std::string(name) + "_sum", labels, data.sum);
  sample(std::string(name) + "_count", labels, static_cast<double>(data.count));
}

}  // namespace kforge::jobs
