#include "chart.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

namespace kiln::tools::bench {
namespace {

constexpr double kWidth = 900;
constexpr double kPlotLeft = 300;   // room for "deeplabv3_mobilenet_v3_large, batch 16"
constexpr double kPlotWidth = 480;  // leaves room on the right for value labels
constexpr double kBarHeight = 14;
constexpr double kBarGap = 2;
constexpr double kGroupGap = 12;
constexpr double kTop = 92;  // below the title, subtitle and legend
constexpr std::array<const char*, 4> kColours{"#4c72b0", "#dd8452", "#55a868", "#8172b3"};

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

std::string text_element(double x, double y, const std::string& text, const std::string& attributes = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + (attributes.empty() ? "" : " " + attributes) + ">" +
         escape_xml(text) + "</text>\n";
}

// A tick step of 1, 2 or 5 times a power of ten giving about five ticks.
double tick_step(double max_value) {
  const double raw = max_value / 5;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * power >= raw) return m * power;
  return 10 * power;
}

}  // namespace

std::string speedup_chart_svg(const Results& results) {
  std::vector<std::string> modes;
  std::vector<std::pair<std::string, std::int64_t>> groups;
  double max_speedup = 1.0;
  for (const Cell& c : results.cells) {
    if (c.mode == results.baseline) continue;
    if (std::find(modes.begin(), modes.end(), c.mode) == modes.end()) modes.push_back(c.mode);
    if (std::find(groups.begin(), groups.end(), std::pair{c.model, c.batch}) == groups.end())
      groups.emplace_back(c.model, c.batch);
    if (c.speedup) max_speedup = std::max(max_speedup, *c.speedup);
  }
  const double group_height = static_cast<double>(modes.size()) * (kBarHeight + kBarGap) + kGroupGap;
  const double plot_height = std::max(1.0, static_cast<double>(groups.size())) * group_height;
  const double height = kTop + plot_height + 40;
  const double step = tick_step(max_speedup * 1.1);
  const double axis_max = std::ceil(max_speedup * 1.1 / step) * step;
  auto x_of = [&](double speedup) { return kPlotLeft + kPlotWidth * speedup / axis_max; };

  const Metadata& m = results.metadata;
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" + num(height) +
         "\" viewBox=\"0 0 " + num(kWidth) + " " + num(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += text_element(kWidth / 2, 24,
                      "kiln bench: speed-up over " + results.baseline + " (mean time per call; higher is better)",
                      "text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\"");
  svg += text_element(kWidth / 2, 44,
                      m.device_name + ", " + m.backend + ", " + std::to_string(m.iters) + " iters, " + m.date_utc,
                      "text-anchor=\"middle\" fill=\"#555555\"");
  for (std::size_t i = 0; i < modes.size(); ++i) {
    const double x = kPlotLeft + static_cast<double>(i) * 170;
    svg += "<rect x=\"" + num(x) + "\" y=\"58\" width=\"12\" height=\"12\" fill=\"" + kColours[i % kColours.size()] + "\"/>\n";
    svg += text_element(x + 18, 69, modes[i]);
  }

  // Grid and axis: ticks along the bottom, the baseline's 1x as a dashed line.
  const double plot_bottom = kTop + plot_height;
  for (double t = 0; t <= axis_max + step / 2; t += step) {
    svg += "<line x1=\"" + num(x_of(t)) + "\" y1=\"" + num(kTop - 4) + "\" x2=\"" + num(x_of(t)) + "\" y2=\"" +
           num(plot_bottom) + "\" stroke=\"#e0e0e0\"/>\n";
    char label[32];
    std::snprintf(label, sizeof label, "%gx", t);
    svg += text_element(x_of(t), plot_bottom + 16, label, "text-anchor=\"middle\" fill=\"#555555\"");
  }
  svg += "<line x1=\"" + num(x_of(1)) + "\" y1=\"" + num(kTop - 8) + "\" x2=\"" + num(x_of(1)) + "\" y2=\"" +
         num(plot_bottom) + "\" stroke=\"#333333\" stroke-dasharray=\"4 3\"/>\n";
  svg += text_element(x_of(1), plot_bottom + 32, results.baseline + " = 1x", "text-anchor=\"middle\"");

  for (std::size_t g = 0; g < groups.size(); ++g) {
    // Named references, not a structured binding: the lambda below captures
    // them, which C++20 allows only from clang 16 on.
    const std::string& model = groups[g].first;
    const std::int64_t batch = groups[g].second;
    const double y0 = kTop + static_cast<double>(g) * group_height;
    const double bars_height = static_cast<double>(modes.size()) * (kBarHeight + kBarGap);
    svg += text_element(kPlotLeft - 8, y0 + bars_height / 2 + 4, model + ", batch " + std::to_string(batch),
                        "text-anchor=\"end\"");
    for (std::size_t i = 0; i < modes.size(); ++i) {
      const double y = y0 + static_cast<double>(i) * (kBarHeight + kBarGap);
      const auto cell = std::find_if(results.cells.begin(), results.cells.end(), [&](const Cell& c) {
        return c.model == model && c.batch == batch && c.mode == modes[i];
      });
      if (cell == results.cells.end()) continue;
      if (!cell->speedup) {
        const std::string why = cell->measured() ? "no " + results.baseline + " time" : status_name(cell->status);
        svg += text_element(kPlotLeft + 4, y + kBarHeight - 3, modes[i] + ": " + why, "fill=\"#888888\"");
        continue;
      }
      const bool wrong = cell->status == CellStatus::mismatch;
      svg += "<rect x=\"" + num(kPlotLeft) + "\" y=\"" + num(y) + "\" width=\"" + num(x_of(*cell->speedup) - kPlotLeft) +
             "\" height=\"" + num(kBarHeight) + "\" fill=\"" + kColours[i % kColours.size()] + "\"" +
             (wrong ? " stroke=\"#d62728\" stroke-width=\"2\"" : "") + "><title>" +
             escape_xml(model + ", batch " + std::to_string(batch) + ", " + modes[i]) + "</title></rect>\n";
      char value[48];
      std::snprintf(value, sizeof value, "%.2fx%s", *cell->speedup, wrong ? " WRONG OUTPUT" : "");
      svg += text_element(x_of(*cell->speedup) + 4, y + kBarHeight - 3, value, wrong ? "fill=\"#d62728\"" : "");
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace kiln::tools::bench
