// render_svg: axes with ticks, one polyline per series, a legend.
#include "formats/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/error.h"

namespace ember::formats {

namespace {

const char* kColors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string tick_label(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-2)) std::snprintf(buf, sizeof buf, "%.0e", v);
  else std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

void render_chart(std::ostringstream& out, const SvgChart& chart, double ox, double w, double h) {
  const double left = ox + 60, right = ox + w - 15, top = 35, bottom = h - 45;
  auto tx = [&](double v) { return chart.log_x ? std::log10(std::max(v, 1e-300)) : v; };
  auto ty = [&](double v) { return chart.log_y ? std::log10(std::max(v, 1e-300)) : v; };
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : chart.series)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, tx(x)), x1 = std::max(x1, tx(x)), y0 = std::min(y0, ty(y)), y1 = std::max(y1, ty(y));
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  double pad = 0.05 * (y1 - y0);
  y0 -= pad, y1 += pad;
  auto px = [&](double x) { return left + (tx(x) - x0) / (x1 - x0) * (right - left); };
  auto py = [&](double y) { return bottom - (ty(y) - y0) / (y1 - y0) * (bottom - top); };

  out << "<text x='" << (left + right) / 2 << "' y='20' text-anchor='middle' font-size='14'>" << escape(chart.title)
      << "</text>\n";
  out << "<rect x='" << left << "' y='" << top << "' width='" << right - left << "' height='" << bottom - top
      << "' fill='none' stroke='#444'/>\n";
  for (int i = 0; i <= 4; ++i) {  // 5 ticks per axis, in axis units (powers of ten on log axes)
    double fx = x0 + (x1 - x0) * i / 4, fy = y0 + (y1 - y0) * i / 4;
    double sx = left + (right - left) * i / 4, sy = bottom - (bottom - top) * i / 4;
    out << "<line x1='" << sx << "' y1='" << bottom << "' x2='" << sx << "' y2='" << top
        << "' stroke='#ddd'/><text x='" << sx << "' y='" << bottom + 15 << "' text-anchor='middle' font-size='11'>"
        << tick_label(chart.log_x ? std::pow(10, fx) : fx) << "</text>\n";
    out << "<line x1='" << left << "' y1='" << sy << "' x2='" << right << "' y2='" << sy
        << "' stroke='#ddd'/><text x='" << left - 5 << "' y='" << sy + 4 << "' text-anchor='end' font-size='11'>"
        << tick_label(chart.log_y ? std::pow(10, fy) : fy) << "</text>\n";
  }
  out << "<text x='" << (left + right) / 2 << "' y='" << h - 12 << "' text-anchor='middle' font-size='12'>"
      << escape(chart.x_label) << "</text>\n";
  out << "<text x='" << ox + 14 << "' y='" << (top + bottom) / 2 << "' text-anchor='middle' font-size='12' "
      << "transform='rotate(-90 " << ox + 14 << ' ' << (top + bottom) / 2 << ")'>" << escape(chart.y_label) << "</text>\n";
  for (size_t s = 0; s < chart.series.size(); ++s) {
    const char* color = kColors[s % 6];
    out << "<polyline fill='none' stroke='" << color << "' stroke-width='2' points='";
    for (auto [x, y] : chart.series[s].points)
      if (std::isfinite(x) && std::isfinite(y)) out << px(x) << ',' << py(y) << ' ';
    out << "'/>\n";
    for (auto [x, y] : chart.series[s].points)
      if (std::isfinite(x) && std::isfinite(y))
        out << "<circle cx='" << px(x) << "' cy='" << py(y) << "' r='2.5' fill='" << color << "'/>\n";
    out << "<text x='" << left + 8 << "' y='" << top + 16 + 15 * s << "' font-size='12' fill='" << color << "'>"
        << escape(chart.series[s].label) << "</text>\n";
  }
}

}  // namespace

std::string render_svg(const std::vector<SvgChart>& charts, int chart_width, int chart_height) {
  std::ostringstream out;
  int width = chart_width * static_cast<int>(std::max<size_t>(charts.size(), 1));
  out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << chart_height
      << "' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  for (size_t i = 0; i < charts.size(); ++i)
    render_chart(out, charts[i], double(i) * chart_width, chart_width, chart_height);
  out << "</svg>\n";
  return out.str();
}

}  // namespace ember::formats
