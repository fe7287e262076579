// run_benchmarks(): what ran where (host and device description), the suites in order, and the
// crossover table derived from the ops and step rows.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <thread>

#include "bench/suites.h"
#include "core/cuda_runtime.h"
#include "core/device.h"
#include "base/error.h"
#include "core/host.h"

namespace ember::bench {

namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

HostInfo host_info() {
  HostInfo h;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) h.cpu_model = line.substr(line.find_first_not_of(' ', colon + 1));
      break;
    }
  }
  if (h.cpu_model.empty()) h.cpu_model = "unknown";
  h.cores = static_cast<int>(std::thread::hardware_concurrency());
  h.threads = num_threads();
  h.blas_threads = blas_threads();
  if (const char* c = std::getenv("OPENBLAS_CORETYPE")) h.openblas_coretype = c;
  return h;
}

DeviceInfo device_info() {
  DeviceInfo d;
  d.available = cuda::is_available();
  if (!d.available) {
    d.reason = cuda::unavailable_reason();
    return d;
  }
  cuda::DeviceProperties p = cuda::properties(0);
  d.name = p.name;
  d.major = p.major, d.minor = p.minor, d.multiprocessors = p.multiprocessors;
  d.total_memory = p.total_memory;
  d.l2_bytes = cuda::runtime::l2_cache_bytes(0);
  d.emulated = cuda::is_emulated();
  return d;
}

TimingOptions timing_for(const BenchConfig& c) {
  TimingOptions o;
  o.flush_l2 = c.flush_l2;
  if (c.quick) o.warmup = 2, o.min_seconds = 0.02, o.max_seconds = 1.0;
  else o.warmup = 3, o.min_seconds = 0.25, o.max_seconds = 5.0;
  return o;
}

}  // namespace

void BenchContext::add(Row row) { report->rows.push_back(std::move(row)); }

void BenchContext::fail(Row row, const std::string& message) {
  std::string where = row.suite + "/" + row.name + " " + row.label + " on " + row.device;
  std::fprintf(stderr, "ember bench: VERIFICATION FAILED: %s: %s\n", where.c_str(), message.c_str());
  report->failures.push_back(where + ": " + message);
  add(unmeasured(std::move(row), "VERIFICATION FAILED: " + message));
}

void BenchContext::progress(const std::string& what) const {
  if (log != nullptr) {
    std::fprintf(log, "\r\033[K[bench] %s", what.c_str());
    std::fflush(log);
  }
}

std::string mismatch(const std::string& what, double diff, double tolerance) {
  char buf[96];
  std::snprintf(buf, sizeof buf, ": max |cuda - cpu| = %.3g > tolerance %.3g", diff, tolerance);
  return what + buf;
}

std::vector<std::string> resolve_suites(const std::vector<std::string>& suites) {
  const auto& names = suite_names();
  std::vector<bool> on(names.size(), false);
  for (const std::string& s : suites) {
    if (s == "all") {
      std::fill(on.begin(), on.end(), true);
      continue;
    }
    auto it = std::find(names.begin(), names.end(), s);
    EMBER_CHECK(it != names.end(), ValueError, "unknown benchmark suite '", s,
                "': choose transfers, gemm, ops, step, conv, attention, cores, crossover or all");
    on[size_t(it - names.begin())] = true;
  }
  EMBER_CHECK(!suites.empty(), ValueError,
              "no benchmark suite selected: choose transfers, gemm, ops, step, conv, attention, cores, crossover or all");
  // The crossover is derived from the ops and step measurements, so it brings them along.
  auto index = [&](const char* n) { return size_t(std::find(names.begin(), names.end(), n) - names.begin()); };
  if (on[index("crossover")]) on[index("ops")] = on[index("step")] = true;
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size(); ++i)
    if (on[i]) out.push_back(names[i]);
  return out;
}

Report run_benchmarks(const BenchConfig& config, std::FILE* log) {
  const std::vector<std::string> suites = resolve_suites(config.suites);
  set_num_threads(config.threads);
  Report report;
  report.date = utc_now();
  report.command = config.command;
  report.quick = config.quick;
  report.flush_l2 = config.flush_l2;
  report.suites = suites;
  report.host = host_info();
  report.device = device_info();

  BenchContext ctx;
  ctx.quick = config.quick;
  ctx.device = report.device;
  ctx.timing = timing_for(config);
  ctx.report = &report;
  ctx.log = log;
  if (ctx.cuda()) {
    ctx.stream = cuda::Stream::compute(Device::cuda(0));
    ctx.copy_stream = cuda::Stream::copy(Device::cuda(0));
    if (config.flush_l2) ctx.flusher = std::make_unique<L2Flusher>(0);
  }
  for (const std::string& s : suites) {
    if (s == "transfers") run_transfers(ctx);
    else if (s == "gemm") run_gemm(ctx);
    else if (s == "ops") run_ops(ctx);
    else if (s == "step") run_step(ctx);
    else if (s == "conv") run_conv(ctx);
    else if (s == "attention") run_attention(ctx);
    else if (s == "cores") run_cores(ctx);
    else if (s == "crossover") report.crossovers = compute_crossovers(report.rows, report.device);
  }
  if (log != nullptr) {
    std::fprintf(log, "\r\033[K");
    std::fflush(log);
  }
  return report;
}

std::vector<Crossover> compute_crossovers(const std::vector<Row>& rows, const DeviceInfo& device) {
  // op -> size -> device -> median seconds (measured rows only)
  std::vector<std::string> order;
  std::map<std::string, std::map<double, std::map<std::string, double>>> medians;
  std::map<std::string, std::string> units;
  for (const Row& r : rows) {
    bool op = r.suite == "ops" && r.name.find("_reference") == std::string::npos;
    bool step = r.suite == "step";
    if (!op && !step) continue;
    if (!medians.count(r.name)) order.push_back(r.name), units[r.name] = step ? "batch" : "elements";
    auto& by_device = medians[r.name][r.size];
    if (r.measured()) by_device[r.device] = r.stats->median;
  }
  auto describe = [](double size, const std::string& unit) {
    return unit == "batch" ? "B=" + std::to_string(int64_t(size)) : format_count(size) + " " + unit;
  };
  std::vector<Crossover> out;
  for (const std::string& name : order) {
    Crossover c;
    c.op = name;
    c.unit = units[name];
    if (!device.available) {
      c.reason_with_copies = c.reason_resident = kNoCudaDevice;
      out.push_back(c);
      continue;
    }
    auto find = [&](const char* dev, std::optional<double>& at, std::string& reason) {
      std::optional<double> largest;
      for (const auto& [size, by_device] : medians[name]) {  // ascending sizes
        auto host = by_device.find("cpu"), other = by_device.find(dev);
        if (host == by_device.end() || other == by_device.end()) continue;
        largest = size;
        if (!at && other->second < host->second) at = size;
      }
      if (!largest) reason = "not measured on both sides";
      else if (!at) reason = "host faster at every measured size (up to " + describe(*largest, c.unit) + ")";
      return largest;
    };
    std::optional<double> largest = find("cuda+copies", c.with_copies, c.reason_with_copies);
    find("cuda", c.resident, c.reason_resident);
    if (largest) {
      const auto& at = medians[name][*largest];
      c.speedup_at_largest = at.at("cpu") / at.at("cuda+copies");
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace ember::bench
