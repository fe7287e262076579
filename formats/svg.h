// A small SVG line-chart writer (no dependency): series of (x, y) points on shared axes.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ember::formats {

struct SvgSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;
};

struct SvgChart {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<SvgSeries> series;
};

// One or more charts side by side in one SVG document.
std::string render_svg(const std::vector<SvgChart>& charts, int chart_width = 480, int chart_height = 320);

}  // namespace ember::formats
