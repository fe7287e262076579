// Renders a benchmark Report: aligned tables, JSON and SVG plots.
#include "bench/report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "base/error.h"
#include "core/ops/registry.h"
#include "formats/file.h"
#include "formats/svg.h"

namespace ember::bench {

namespace {

// Columns padded to their widest cell, two spaces apart.
std::string aligned(const std::vector<std::vector<std::string>>& lines) {
  std::vector<size_t> width;
  for (const auto& line : lines)
    for (size_t c = 0; c < line.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], line[c].size());
    }
  std::ostringstream out;
  for (const auto& line : lines) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      text += line[c];
      if (c + 1 < line.size()) text += std::string(width[c] - line[c].size() + 2, ' ');
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << "  " << text << '\n';
  }
  return out.str();
}

// Three significant digits at most, but no exponent: "3210 GB/s", "45.6 GB/s", "1.23 GB/s".
std::string three_digits(double v, const char* unit) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f %s", v >= 100 ? 0 : v >= 10 ? 1 : 2, v, unit);
  return buf;
}

std::string rate_text(const Row& row) {
  if (auto g = row.gflop_per_s()) return three_digits(*g, "GFLOP/s");
  if (auto b = row.gb_per_s()) return three_digits(*b, "GB/s");
  return "";
}

std::string cell_text(const Row& row) {
  if (!row.measured()) return row.reason.substr(0, row.reason.find(':'));  // the details are in the JSON
  std::string rate = rate_text(row);
  return rate.empty() ? format_seconds(row.stats->median) : rate + "  " + format_seconds(row.stats->median);
}

template <typename T>
void add_unique(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

std::string format_suite(const Report& report, const std::string& suite) {
  std::vector<std::string> tables;
  for (const Row& r : report.rows)
    if (r.suite == suite) add_unique(tables, r.table);
  std::ostringstream out;
  for (const std::string& table : tables) {
    std::vector<std::string> columns, labels;
    std::map<std::pair<std::string, std::string>, const Row*> cells;
    std::map<std::string, std::string> notes;
    for (const Row& r : report.rows) {
      if (r.suite != suite || r.table != table) continue;
      add_unique(columns, r.column);
      add_unique(labels, r.label);
      cells[{r.label, r.column}] = &r;
      for (const Extra& e : r.extras)
        if (!e.text.empty()) notes[r.label] += (notes[r.label].empty() ? "" : "; ") + e.text;
    }
    bool any_notes = !notes.empty();
    std::vector<std::vector<std::string>> lines;
    std::vector<std::string> header = {""};
    for (const std::string& c : columns)  // every device figure of an emulated run says so
      header.push_back(report.device.emulated && c.rfind("cpu", 0) != 0 ? c + " [emulated]" : c);
    if (any_notes) header.push_back("notes");
    lines.push_back(header);
    for (const std::string& label : labels) {
      std::vector<std::string> line = {label};
      for (const std::string& column : columns) {
        auto it = cells.find({label, column});
        line.push_back(it == cells.end() ? "-" : cell_text(*it->second));
      }
      if (any_notes) line.push_back(notes[label]);
      lines.push_back(line);
    }
    out << "\n-- " << table << " --\n" << aligned(lines);
  }
  return out.str();
}

std::string crossover_size(const std::optional<double>& size, const std::string& unit, const std::string& reason) {
  if (!size) return reason;
  return unit == "batch" ? "B=" + std::to_string(int64_t(*size)) : format_count(*size) + " " + unit;
}

}  // namespace

std::string format_report(const Report& report) {
  std::ostringstream out;
  out << (report.command.empty() ? std::string("ember bench") : report.command) << "  (" << report.date << ")\n";
  out << "host:   " << report.host.cpu_model << ", " << report.host.cores << " cores, " << report.host.threads
      << " kernel threads (OpenBLAS " << report.host.blas_threads << " per tile)";
  if (!report.host.openblas_coretype.empty()) out << ", OPENBLAS_CORETYPE=" << report.host.openblas_coretype;
  out << '\n';
  if (report.device.available) {
    out << "device: " << report.device.name << " (sm_" << report.device.major << report.device.minor << ", "
        << report.device.multiprocessors << " SMs, L2 " << format_bytes(double(report.device.l2_bytes)) << ")"
        << (report.flush_l2 ? ", L2 flushed before each repetition" : "") << '\n';
    if (report.device.emulated)
      out << "        EMULATED: the [emulated] columns time ember's CUDA emulator on this CPU; they check that the "
             "device paths run, and say nothing about GPU performance\n";
  } else {
    out << "device: " << kNoCudaDevice << " (" << report.device.reason << ")\n";
  }
  out << "cells:  rate (counted bytes or FLOPs / median time) and median time of >= 20 repetitions "
         "(fewer when one takes long); p95, cv and reps in the JSON\n";
  for (const std::string& suite : report.suites) {
    if (suite == "crossover") continue;
    out << "\n== " << suite << " ==\n" << format_suite(report, suite);
  }
  bool crossover = std::find(report.suites.begin(), report.suites.end(), "crossover") != report.suites.end();
  if (crossover && report.device.emulated) {
    out << "\n== crossover ==\nnot reported: the device is ember's CUDA emulator on the CPU, which has no crossover "
           "with the host worth a number\n";
  } else if (crossover) {
    out << "\n== crossover: the smallest measured size at which the device beats the host ==\n";
    std::vector<std::vector<std::string>> lines = {
        {"op", "device + copies (pinned H2D in, D2H out)", "data already on device",
         "speedup at largest size (host / device+copies)"}};
    for (const Crossover& c : report.crossovers) {
      char speedup[32] = "-";
      if (c.speedup_at_largest) std::snprintf(speedup, sizeof speedup, "%.2fx", *c.speedup_at_largest);
      lines.push_back({c.op, crossover_size(c.with_copies, c.unit, c.reason_with_copies),
                       crossover_size(c.resident, c.unit, c.reason_resident), speedup});
    }
    out << aligned(lines);
  }
  if (!report.failures.empty()) {
    out << "\nVERIFICATION FAILED for " << report.failures.size() << " row(s):\n";
    for (const std::string& f : report.failures) out << "  " << f << '\n';
  }
  return out.str();
}

nlohmann::ordered_json report_json(const Report& report) {
  using json = nlohmann::ordered_json;
  auto optional = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json j;
  j["schema"] = "ember-bench/1";
  j["date"] = report.date;
  j["command"] = report.command;
  j["quick"] = report.quick;
  j["l2_flush"] = report.flush_l2;
  j["suites"] = report.suites;
  j["host"] = {{"cpu_model", report.host.cpu_model},
               {"cores", report.host.cores},
               {"threads", report.host.threads},
               {"blas_threads", report.host.blas_threads},
               {"openblas_coretype", report.host.openblas_coretype.empty() ? json(nullptr) : json(report.host.openblas_coretype)}};
  const DeviceInfo& d = report.device;
  if (d.available)
    j["device"] = {{"available", true},       {"name", d.name},
                   {"compute_capability", std::to_string(d.major) + "." + std::to_string(d.minor)},
                   {"multiprocessors", d.multiprocessors}, {"total_memory_bytes", d.total_memory},
                   {"l2_bytes", d.l2_bytes},       {"emulated", d.emulated}};
  else
    j["device"] = {{"available", false}, {"reason", d.reason}};
  json results = json::array();
  for (const Row& r : report.rows) {
    json params = json::object();
    for (const auto& [k, v] : r.params) params[k] = v;
    json row = {{"suite", r.suite}, {"table", r.table}, {"name", r.name},   {"label", r.label},
                {"params", params}, {"size", r.size},   {"column", r.column}, {"device", r.device},
                {"timer", r.timer}, {"bytes", r.bytes}, {"flops", r.flops}};
    if (r.stats)
      row["stats"] = {{"median_s", r.stats->median}, {"p95_s", r.stats->p95}, {"mean_s", r.stats->mean},
                      {"min_s", r.stats->min},       {"cv", r.stats->cv},     {"reps", r.stats->reps}};
    else
      row["stats"] = nullptr;
    row["emulated"] = d.emulated && r.device != "cpu";
    row["gb_per_s"] = optional(r.gb_per_s());
    row["gflop_per_s"] = optional(r.gflop_per_s());
    row["reason"] = r.measured() ? json(nullptr) : json(r.reason);
    json extras = json::object();
    for (const Extra& e : r.extras) extras[e.key] = e.value;
    row["extras"] = extras;
    results.push_back(row);
  }
  j["results"] = results;
  json crossovers = json::array();
  for (const Crossover& c : report.crossovers)
    crossovers.push_back({{"op", c.op},
                          {"unit", c.unit},
                          {"with_copies", optional(c.with_copies)},
                          {"resident", optional(c.resident)},
                          {"reason_with_copies", c.with_copies ? json(nullptr) : json(c.reason_with_copies)},
                          {"reason_resident", c.resident ? json(nullptr) : json(c.reason_resident)},
                          {"speedup_at_largest", optional(c.speedup_at_largest)}});
  j["crossover"] = crossovers;
  j["failures"] = report.failures;
  return j;
}

namespace {

using formats::SvgChart;
using formats::SvgSeries;

// One series per (name, device) of a suite's rows, y from `value`; empty series are dropped.
SvgSeries series_of(const Report& report, const std::string& suite, const std::string& name, const std::string& column,
                    const std::string& label, std::optional<double> (*value)(const Row&)) {
  SvgSeries s{label, {}};
  for (const Row& r : report.rows)
    if (r.suite == suite && r.name == name && r.column == column)
      if (auto v = value(r)) s.points.push_back({r.size, *v});
  return s;
}

std::optional<double> gbps(const Row& r) { return r.gb_per_s(); }
std::optional<double> gflops(const Row& r) { return r.gflop_per_s(); }
std::optional<double> milliseconds(const Row& r) {
  return r.stats ? std::optional<double>(r.stats->median * 1e3) : std::nullopt;
}

void add_series(SvgChart& chart, SvgSeries s) {
  if (!s.points.empty()) chart.series.push_back(std::move(s));
}

SvgChart chart(const std::string& title, const std::string& x, const std::string& y, const Report& report,
               bool device_series) {
  SvgChart c;
  c.title = title + (device_series && !report.device.available ? " (no CUDA device)" : "");
  c.x_label = x, c.y_label = y, c.log_x = true, c.log_y = true;
  return c;
}

std::vector<SvgChart> transfer_charts(const Report& r) {
  std::vector<SvgChart> charts;
  for (const char* dir : {"h2d", "d2h"}) {
    SvgChart c = chart(std::string(dir[0] == 'h' ? "H2D" : "D2H") + " bandwidth", "bytes", "GB/s", r, true);
    for (const char* mem : {"pageable", "pinned"})
      for (const char* mode : {"sync", "async"})
        add_series(c, series_of(r, "transfers", std::string(dir) + "_" + mem + "_" + mode, std::string(mem) + " " + mode,
                                std::string(mem) + " " + mode, gbps));
    charts.push_back(c);
  }
  SvgChart copy = chart("copy bandwidth (read + write)", "bytes", "GB/s", r, false);
  add_series(copy, series_of(r, "transfers", "memcpy", "host memcpy", "host memcpy", gbps));
  add_series(copy, series_of(r, "transfers", "d2d", "D2D", "device D2D", gbps));
  charts.push_back(copy);
  return charts;
}

std::vector<SvgChart> gemm_charts(const Report& r) {
  SvgChart c = chart("square SGEMM", "n (n x n x n)", "GFLOP/s", r, false);
  for (const char* d : {"cpu", "cuda", "cublas"}) add_series(c, series_of(r, "gemm", "sgemm", d, d, gflops));
  return {c};
}

// The ops suite's rows (the registry's timed ones) in two plots: pointwise and optimizer; reductions and softmax.
const std::vector<std::vector<std::string>>& op_groups() {
  static const std::vector<std::vector<std::string>> groups = [] {
    std::vector<std::vector<std::string>> g(2);
    for (const ops::OpRow& row : ops::op_registry()) {
      if (row.bench == nullptr) continue;
      const std::string family = row.family;
      g[family == "reduce" || family == "softmax_xent" ? 1 : 0].push_back(row.name);
    }
    return g;
  }();
  return groups;
}

std::vector<SvgChart> ops_charts(const Report& r) {
  std::vector<SvgChart> charts;
  for (const char* device : {"cpu", "cuda"}) {
    for (size_t g = 0; g < op_groups().size(); ++g) {
      SvgChart c = chart(std::string(device) + (g == 0 ? ": elementwise, copies, optimizer" : ": reductions, softmax"),
                         "elements", "GB/s", r, false);
      for (const std::string& op : op_groups()[g]) add_series(c, series_of(r, "ops", op, device, op, gbps));
      if (!c.series.empty()) charts.push_back(c);
    }
  }
  return charts;
}

const char* kStepColumns[] = {"cpu", "cuda (batch on device)", "cuda + H2D (batch from pinned)"};

std::vector<SvgChart> step_charts(const Report& r) {
  SvgChart c = chart("MLP training step", "batch size", "median ms per step", r, false);
  for (const char* col : kStepColumns) add_series(c, series_of(r, "step", "mlp_step", col, col, milliseconds));
  return {c};
}

// Host time / (device + copies) time per size: above 1 the device wins even counting the bus.
std::vector<SvgChart> crossover_charts(const Report& r) {
  std::vector<SvgChart> charts;
  for (size_t g = 0; g < op_groups().size(); ++g) {
    SvgChart c = chart(g == 0 ? "device speedup incl. copies: elementwise, copies, optimizer"
                              : "device speedup incl. copies: reductions, softmax",
                       "elements", "host time / (device + copies) time", r, true);
    double lo = 0, hi = 0;
    for (const std::string& op : op_groups()[g]) {
      std::map<double, double> host, device;
      for (const Row& row : r.rows) {
        if (row.suite != "ops" || row.name != op || !row.stats) continue;
        if (row.device == "cpu") host[row.size] = row.stats->median;
        if (row.device == "cuda+copies") device[row.size] = row.stats->median;
      }
      SvgSeries s{op, {}};
      for (auto [size, t] : device)
        if (host.count(size)) {
          s.points.push_back({size, host[size] / t});
          lo = lo == 0 ? size : std::min(lo, size), hi = std::max(hi, size);
        }
      add_series(c, s);
    }
    if (!c.series.empty()) c.series.push_back({"break-even", {{lo, 1.0}, {hi, 1.0}}});
    charts.push_back(c);
  }
  for (SvgChart& c : step_charts(r)) charts.push_back(c);
  return charts;
}

}  // namespace

std::vector<std::string> write_svgs(const Report& report, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  EMBER_CHECK(!ec, IoError, "cannot create the SVG directory ", dir, ": ", ec.message());
  std::vector<std::string> written;
  for (const std::string& suite : report.suites) {
    std::vector<SvgChart> charts;
    if (suite == "transfers") charts = transfer_charts(report);
    else if (suite == "gemm") charts = gemm_charts(report);
    else if (suite == "ops") charts = ops_charts(report);
    else if (suite == "step") charts = step_charts(report);
    else if (suite == "crossover") charts = crossover_charts(report);
    if (charts.empty()) continue;
    std::string path = (std::filesystem::path(dir) / (suite + ".svg")).string();
    formats::write_text_file(path, formats::render_svg(charts));
    written.push_back(path);
  }
  return written;
}

}  // namespace ember::bench
