#include "kforge/bench/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kforge/common/markup.h"

namespace kforge::bench {
namespace {

constexpr double kWidth = 760;
constexpr double kHeight = 420;
constexpr double kLeft = 70;    // room for the axis labels
constexpr double kRight = 170;  // room for the legend
constexpr double kTop = 48;
constexpr double kBottom = 56;
constexpr std::array<const char*, 8> kColors = {"#7f7f7f", "#bcbd22", "#1f77b4", "#ff7f0e",
                                                "#2ca02c", "#d62728", "#9467bd", "#8c564b"};

std::string tick_label(double ms) {
  if (ms >= 1) return fmt::format("{:g} ms", ms);
  if (ms >= 1e-3) return fmt::format("{:g} µs", ms * 1e3);
  return fmt::format("{:g} ns", ms * 1e6);
}

}  // namespace

std::string render_time_chart(const Json& op, const Json& sizes) {
  const Json rows = op.value("rows", Json::array());
  std::vector<std::string> size_names;
  for (const auto& s : sizes) {
    if (s.is_string()) size_names.push_back(s.get<std::string>());
  }
  // The log-scale range: whole decades around every time shown.
  double lo = HUGE_VAL;
  double hi = 0;
  for (const auto& row : rows) {
    for (const auto& size : size_names) {
      const Json cell = row.value("sizes", Json::object()).value(size, Json::object());
      if (cell.contains("mean_ms") && cell["mean_ms"].is_number()) {
        const double ms = cell["mean_ms"].get<double>();
        if (ms > 0) {
          lo = std::min(lo, ms);
          hi = std::max(hi, ms);
        }
      }
    }
  }
  if (hi <= 0) {
    lo = 1e-3;
    hi = 1;
  }
  const double d_lo = std::floor(std::log10(lo));
  const double d_hi = std::max(d_lo + 1, std::ceil(std::log10(hi)));
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  auto y_of = [&](double ms) {
    return kTop + plot_h * (1.0 - (std::log10(ms) - d_lo) / (d_hi - d_lo));
  };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kWidth, kHeight);
  svg += fmt::format(
      "<text x=\"{}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}: mean time per call "
      "({}, log scale)</text>\n",
      kLeft, xml_escape(op.value("title", op.value("op", "?"))), xml_escape(op.value("dtype", "")));
  // One grid line per decade; d_lo and d_hi are whole numbers (floor/ceil above).
  const int decades = static_cast<int>(d_hi - d_lo);
  for (int i = 0; i <= decades; ++i) {
    const double d = d_lo + i;
    const double y = y_of(std::pow(10.0, d));
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#dddddd\"/>\n"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        kLeft, y, kLeft + plot_w, kLeft - 6, y + 4, tick_label(std::pow(10.0, d)));
  }
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n"
      "<line x1=\"{0}\" y1=\"{2}\" x2=\"{3}\" y2=\"{2}\" stroke=\"black\"/>\n",
      kLeft, kTop, kTop + plot_h, kLeft + plot_w);

  const double group_w = plot_w / static_cast<double>(std::max<size_t>(1, size_names.size()));
  const double bar_w = group_w * 0.8 / static_cast<double>(std::max<size_t>(1, rows.size()));
  for (size_t g = 0; g < size_names.size(); ++g) {
    const double x0 = kLeft + group_w * static_cast<double>(g) + group_w * 0.1;
    std::string label = size_names[g];
    const Json& size_info = op.value("sizes", Json::object()).value(size_names[g], Json::object());
    svg += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#555555\" "
        "font-size=\"10\">{}</text>\n",
        x0 + group_w * 0.4, kTop + plot_h + 18, xml_escape(label), x0 + group_w * 0.4,
        kTop + plot_h + 32, xml_escape(size_info.value("label", "")));
    for (size_t r = 0; r < rows.size(); ++r) {
      const Json cell = rows[r].value("sizes", Json::object()).value(size_names[g], Json::object());
      const double x = x0 + bar_w * static_cast<double>(r);
      const char* color = kColors[r % kColors.size()];
      if (cell.contains("mean_ms") && cell["mean_ms"].is_number() &&
          cell["mean_ms"].get<double>() > 0) {
        const double ms = cell["mean_ms"].get<double>();
        const double y = y_of(ms);
        svg += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
            "<title>{} {}: {:.4g} ms</title></rect>\n",
            x, y, bar_w * 0.9, kTop + plot_h - y, color, xml_escape(rows[r].value("kernel", "?")),
            xml_escape(size_names[g]), ms);
      } else {
        const double y = kTop + plot_h - 8;
        svg += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"{}\">×<title>{} {}: "
            "no time (failed or not run)</title></text>\n",
            x + bar_w * 0.45, y, color, xml_escape(rows[r].value("kernel", "?")),
            xml_escape(size_names[g]));
      }
    }
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    const double y = kTop + 8 + 20 * static_cast<double>(r);
    const std::string kernel = rows[r].value("kernel", "?");
    const bool failed = !rows[r].value("correct", false);
    svg += fmt::format(
        "<rect x=\"{0:.1f}\" y=\"{1:.1f}\" width=\"12\" height=\"12\" fill=\"{2}\"/>\n"
        "<text x=\"{3:.1f}\" y=\"{4:.1f}\">{5}{6}</text>\n",
        kWidth - kRight + 16, y, kColors[r % kColors.size()], kWidth - kRight + 34, y + 10,
        xml_escape(kernel), failed ? " (failed)" : "");
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace kforge::bench
