// Tests of the benchmark harness and `ember bench`: statistics and the repetition rule on synthetic
// timings, the crossover derivation on synthetic rows, the JSON schema of a --quick CPU run, and the
// CLI marking device columns unavailable (never zero) without a GPU. No timing is asserted.
#include <catch2/catch.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <map>
#include <random>
#include <set>
#include <string>

#include "bench/harness.h"
#include "bench/report.h"
#include "bench/suites.h"
#include "core/device.h"
#include "core/ops/registry.h"
#include "kernels/cpu/parallel.h"
#include "base/error.h"
#include "support/run_ember.h"

namespace fs = std::filesystem;
using namespace ember;
using namespace ember::bench;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ember-bench-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

Row timed_row(const std::string& suite, const std::string& name, double size, const std::string& device, double median) {
  Row r;
  r.suite = suite, r.name = name, r.size = size, r.device = device, r.column = device, r.table = name;
  r.label = std::to_string(size);
  Stats s;
  s.median = median, s.reps = 20;
  r.stats = s;
  return r;
}

// Every device row of a report without a GPU says so: no stats, no rate, the reason.
void check_json_rows(const nlohmann::json& results) {
  REQUIRE(results.is_array());
  REQUIRE(!results.empty());
  for (const auto& row : results) {
    INFO(row.dump());
    for (const char* key : {"suite", "table", "name", "label", "params", "size", "column", "device", "timer", "bytes",
                            "flops", "stats", "gb_per_s", "gflop_per_s", "reason", "extras"})
      CHECK(row.contains(key));
    if (row["device"] == "cpu") {
      REQUIRE(row["stats"].is_object());
      for (const char* key : {"median_s", "p95_s", "mean_s", "min_s", "cv", "reps"}) CHECK(row["stats"].contains(key));
      CHECK(row["stats"]["reps"].get<int64_t>() >= kMinRepsFloor);
      CHECK(row["stats"]["median_s"].get<double>() > 0);
      CHECK(row["stats"]["p95_s"].get<double>() >= row["stats"]["median_s"].get<double>());
      CHECK(row["gb_per_s"].get<double>() > 0);
      CHECK(row["reason"].is_null());
    } else if (!cuda::is_available()) {
      CHECK(row["stats"].is_null());
      CHECK(row["gb_per_s"].is_null());
      CHECK(row["gflop_per_s"].is_null());
      CHECK(row["reason"] == kNoCudaDevice);
    } else {
      CHECK(row["stats"].is_object());  // a GPU machine measures them
    }
  }
}

}  // namespace

TEST_CASE("compute_stats: median, p95, mean, min and cv of synthetic timings", "[bench]") {
  std::vector<double> samples;
  for (int i = 1; i <= 20; ++i) samples.push_back(i);
  std::shuffle(samples.begin(), samples.end(), std::mt19937(7));  // order must not matter
  Stats s = compute_stats(samples);
  CHECK(s.reps == 20);
  CHECK(s.median == Approx(10.5).epsilon(1e-12));
  CHECK(s.p95 == Approx(19.05).epsilon(1e-12));  // position 0.95 * 19 = 18.05 between 19 and 20
  CHECK(s.mean == Approx(10.5).epsilon(1e-12));
  CHECK(s.min == 1);
  CHECK(s.cv == Approx(std::sqrt(35.0) / 10.5).epsilon(1e-12));  // sample variance of 1..20 is 35

  Stats odd = compute_stats({0.003, 0.001, 0.002});
  CHECK(odd.median == Approx(0.002).epsilon(1e-12));
  CHECK(odd.p95 == Approx(0.0029).epsilon(1e-12));
  CHECK(odd.cv == Approx(0.5).epsilon(1e-12));

  Stats one = compute_stats({0.25});
  CHECK(one.median == 0.25);
  CHECK(one.p95 == 0.25);
  CHECK(one.cv == 0);
  CHECK(compute_stats({2, 2, 2, 2}).cv == 0);
  CHECK_THROWS_AS(compute_stats({}), ValueError);
}

TEST_CASE("keep_going: at least min_reps and min_seconds, at most max_reps or max_seconds", "[bench]") {
  TimingOptions o;
  o.min_reps = 20, o.max_reps = 1000, o.min_seconds = 0.1, o.max_seconds = 2;
  CHECK(keep_going(0, 0, o));
  CHECK(keep_going(19, 0.5, o));    // below min_reps
  CHECK(keep_going(20, 0.05, o));   // cheap runs: fill min_seconds
  CHECK_FALSE(keep_going(20, 0.1, o));
  CHECK_FALSE(keep_going(1000, 0.01, o));  // max_reps
  CHECK_FALSE(keep_going(5, 2.5, o));      // the time budget ends a slow benchmark early ...
  CHECK(keep_going(kMinRepsFloor - 1, 100, o));  // ... but never below the floor

  int64_t calls = 0, batch = 0;
  o.warmup = 2, o.min_seconds = 0, o.max_seconds = 1e9, o.min_sample_seconds = 0;
  std::vector<double> samples = sample_host([&] { ++calls; }, o, &batch);
  CHECK(samples.size() == 20);
  CHECK(batch == 1);
  CHECK(calls == 22);  // the warm-up runs are not samples
  for (double t : samples) CHECK(t >= 0);
}

TEST_CASE("sample_host batches calls far shorter than min_sample_seconds into one sample", "[bench]") {
  TimingOptions o;
  o.warmup = 1, o.min_reps = 20, o.min_seconds = 0, o.max_seconds = 1e9;
  o.min_sample_seconds = 1.0;  // an increment never takes a second: the batch grows to its cap
  int64_t calls = 0, batch = 0;
  std::vector<double> samples = sample_host([&] { ++calls; }, o, &batch);
  CHECK(samples.size() == 20);
  CHECK(batch == 10000);
  CHECK(calls == 1 + 20 * batch);
}

TEST_CASE("Row derives GB/s and GFLOP/s from what it counts, and an unmeasured row has none", "[bench]") {
  Row r = timed_row("ops", "add", 1, "cpu", 0.5);
  r.bytes = 1e9;
  REQUIRE(r.gb_per_s().has_value());
  CHECK(*r.gb_per_s() == Approx(2.0));
  CHECK_FALSE(r.gflop_per_s().has_value());  // FLOPs were not counted
  r.flops = 4e9;
  CHECK(*r.gflop_per_s() == Approx(8.0));
  Row u = unmeasured(r, kNoCudaDevice);
  CHECK_FALSE(u.measured());
  CHECK_FALSE(u.gb_per_s().has_value());
  CHECK(u.reason == kNoCudaDevice);
  Row m = measured(u, {0.1, 0.3, 0.2});
  CHECK(m.measured());
  CHECK(m.reason.empty());
  CHECK(m.stats->median == Approx(0.2));
}

TEST_CASE("size and time formatting", "[bench]") {
  CHECK(format_bytes(4096) == "4 KiB");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(double(int64_t(1) << 30)) == "1 GiB");
  CHECK(format_count(1 << 20) == "1M");
  CHECK(format_count(1000) == "1000");
  CHECK(format_seconds(1.23e-3) == "1.23 ms");
  CHECK(format_seconds(4.5e-6) == "4.5 us");
}

TEST_CASE("resolve_suites expands all, brings ops and step along with crossover, rejects unknown names", "[bench]") {
  CHECK(resolve_suites({"all"}) == suite_names());
  CHECK(resolve_suites({"crossover"}) == std::vector<std::string>{"ops", "step", "crossover"});
  CHECK(resolve_suites({"step", "transfers"}) == std::vector<std::string>{"transfers", "step"});
  CHECK_THROWS_AS(resolve_suites({"gemms"}), ValueError);
  CHECK_THROWS_WITH(resolve_suites({"gemms"}),
                    Catch::Contains("transfers, gemm, ops, step, conv, attention, cores, crossover or all"));
}

TEST_CASE("compute_crossovers: the smallest measured size where the device (with copies) beats the host", "[bench]") {
  std::vector<Row> rows;
  const double host[] = {1e-3, 2e-3, 3e-3}, copies[] = {5e-3, 1.5e-3, 1e-3}, resident[] = {5e-4, 5e-4, 5e-4};
  const double sizes[] = {1024, 16384, 262144};
  for (int i = 0; i < 3; ++i) {
    rows.push_back(timed_row("ops", "add", sizes[i], "cpu", host[i]));
    rows.push_back(timed_row("ops", "add", sizes[i], "cuda", resident[i]));
    rows.push_back(timed_row("ops", "add", sizes[i], "cuda+copies", copies[i]));
    rows.push_back(timed_row("ops", "sum", sizes[i], "cpu", 1e-6));
    rows.push_back(timed_row("ops", "sum", sizes[i], "cuda+copies", 1e-3));
  }
  rows.push_back(unmeasured(timed_row("ops", "sum", 1024, "cuda", 1), "VERIFICATION FAILED: x"));
  rows.push_back(timed_row("ops", "memcpy_reference", 1024, "cpu", 1e-9));  // not an op
  rows.push_back(timed_row("gemm", "sgemm", 1024, "cpu", 1));               // not in the crossover
  for (double B : {32.0, 256.0}) {
    rows.push_back(timed_row("step", "mlp_step", B, "cpu", B * 1e-5));
    rows.push_back(timed_row("step", "mlp_step", B, "cuda", 1e-3));
    rows.push_back(timed_row("step", "mlp_step", B, "cuda+copies", 1.1e-3));
  }
  DeviceInfo gpu;
  gpu.available = true;
  std::vector<Crossover> c = compute_crossovers(rows, gpu);
  REQUIRE(c.size() == 3);
  CHECK(c[0].op == "add");
  CHECK(c[0].unit == "elements");
  REQUIRE(c[0].with_copies.has_value());
  CHECK(*c[0].with_copies == 16384);
  REQUIRE(c[0].resident.has_value());
  CHECK(*c[0].resident == 1024);
  CHECK(*c[0].speedup_at_largest == Approx(3.0));

  CHECK(c[1].op == "sum");
  CHECK_FALSE(c[1].with_copies.has_value());
  CHECK_THAT(c[1].reason_with_copies, Catch::Contains("host faster at every measured size") && Catch::Contains("256K"));
  CHECK_FALSE(c[1].resident.has_value());
  CHECK(c[1].reason_resident == "not measured on both sides");

  CHECK(c[2].op == "mlp_step");
  CHECK(c[2].unit == "batch");
  CHECK(*c[2].with_copies == 256);  // 2.56 ms on the host vs 1.1 ms
  CHECK(*c[2].resident == 256);

  std::vector<Crossover> none = compute_crossovers(rows, DeviceInfo{});
  REQUIRE(none.size() == 3);
  for (const Crossover& x : none) {
    CHECK_FALSE(x.with_copies.has_value());
    CHECK(x.reason_with_copies == kNoCudaDevice);
    CHECK(x.reason_resident == kNoCudaDevice);
    CHECK_FALSE(x.speedup_at_largest.has_value());
  }
}

TEST_CASE("a --quick transfers run through the library: JSON schema, table and SVG", "[bench]") {
  BenchConfig config;
  config.suites = {"transfers"};
  config.quick = true;
  config.command = "test";
  Report report = run_benchmarks(config);
  REQUIRE(report.failures.empty());
  nlohmann::json j = nlohmann::json::parse(report_json(report).dump());
  CHECK(j["schema"] == "ember-bench/1");
  CHECK(j["quick"] == true);
  CHECK(j["suites"] == nlohmann::json::array({"transfers"}));
  for (const char* key : {"cpu_model", "cores", "blas_threads", "openblas_coretype"}) CHECK(j["host"].contains(key));
  CHECK(j["host"]["cores"].get<int>() >= 1);
  CHECK(j["device"]["available"] == cuda::is_available());
  if (!cuda::is_available()) CHECK(j["device"]["reason"].get<std::string>().size() > 0);
  CHECK(j["crossover"].is_array());
  CHECK(j["failures"].empty());
  check_json_rows(j["results"]);

  // The host memcpy at each quick size, and every bus mode at each size on the device side.
  int host_rows = 0, h2d_pinned_async = 0;
  for (const auto& row : j["results"]) {
    host_rows += row["name"] == "memcpy";
    h2d_pinned_async += row["name"] == "h2d_pinned_async";
    if (row["name"] == "memcpy") CHECK(row["bytes"].get<double>() == 2 * row["params"]["bytes"].get<double>());
  }
  CHECK(host_rows == 5);
  CHECK(h2d_pinned_async == 5);

  std::string table = format_report(report);
  CHECK_THAT(table, Catch::Contains("host memcpy") && Catch::Contains("pinned async") && Catch::Contains("GB/s"));
  if (!cuda::is_available()) CHECK_THAT(table, Catch::Contains(kNoCudaDevice));

  fs::path dir = fresh_dir("svg");
  std::vector<std::string> written = write_svgs(report, (dir / "plots").string());
  REQUIRE(written.size() == 1);
  CHECK(slurp(written[0]).find("<svg") == 0);
  CHECK(slurp(written[0]).find("host memcpy") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("the cores suite: a cache line's round trip from the first core to each other one", "[bench]") {
  BenchConfig config;
  config.suites = {"cores"};
  config.quick = true;
  const int threads = kernels::cpu::num_threads();
  const Report report = run_benchmarks(config);
  kernels::cpu::set_num_threads(threads);
  const int cores = kernels::cpu::available_cores();
  if (cores < 2) {
    REQUIRE(report.rows.size() == 1);
    CHECK_FALSE(report.rows[0].measured());
    return;
  }
  REQUIRE(report.rows.size() == size_t(std::min(cores - 1, 7)));
  for (const Row& r : report.rows) {
    CHECK(r.suite == "cores");
    CHECK_THAT(r.label, Catch::StartsWith("core ") && Catch::Contains(" <-> core "));
    REQUIRE(r.measured());
    CHECK(r.stats->reps == 21);
    // A hand-off between two cores goes through the cache-coherence protocol: tens of nanoseconds at least, never
    // the nanosecond of a thread reading its own store.
    CHECK(r.stats->min > 5e-9);
  }
}

TEST_CASE("the cores suite on a process allowed one core: one unmeasured row that says why", "[bench]") {
  cpu_set_t saved, one;
  REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const int threads = kernels::cpu::num_threads();
  BenchConfig config;
  config.suites = {"cores"};
  config.quick = true;
  const Report report = run_benchmarks(config);
  sched_setaffinity(0, sizeof saved, &saved);
  kernels::cpu::set_num_threads(threads);
  REQUIRE(report.rows.size() == 1);
  CHECK_FALSE(report.rows[0].measured());
  CHECK_THAT(report.rows[0].reason, Catch::Contains("one core"));
  CHECK(report.rows[0].label == "core " + std::to_string(first));
}

TEST_CASE("ember bench --quick --suite transfers: device columns say 'no CUDA device', never zero", "[bench][apps]") {
  fs::path dir = fresh_dir("cli");
  fs::path json_path = dir / "out" / "bench.json";
  test::EmberRun r = test::run_ember("bench --quick --suite transfers --json " + json_path.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("== transfers ==") && Catch::Contains("host memcpy"));
  auto j = nlohmann::json::parse(slurp(json_path));
  check_json_rows(j["results"]);
  if (!cuda::is_available()) {
    CHECK_THAT(r.output, Catch::Contains("device: no CUDA device"));
    // Each H2D/D2H line: the four device cells say why instead of showing a number.
    size_t at = r.output.find("-- H2D");
    REQUIRE(at != std::string::npos);
    size_t line_start = r.output.find("4 KiB", at);
    std::string line = r.output.substr(line_start, r.output.find('\n', line_start) - line_start);
    size_t cells = 0;
    for (size_t p = line.find(kNoCudaDevice); p != std::string::npos; p = line.find(kNoCudaDevice, p + 1)) ++cells;
    CHECK(cells == 4);
    CHECK(line.find("GB/s") == std::string::npos);
    CHECK(line.find(" 0 ") == std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("ember bench --quick --suite ops times every timed row of the op registry at every size", "[bench][apps]") {
  fs::path dir = fresh_dir("ops");
  fs::path json_path = dir / "bench.json";
  test::EmberRun r = test::run_ember("bench --quick --suite ops --json " + json_path.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(slurp(json_path));
  check_json_rows(j["results"]);
  CHECK(j["failures"].empty());
  // op name -> device -> sizes measured (or said unmeasurable)
  std::map<std::string, std::map<std::string, std::set<double>>> seen;
  for (const auto& row : j["results"]) seen[row["name"]][row["device"]].insert(row["size"].get<double>());
  int timed = 0;
  for (const ops::OpRow& op : ops::op_registry()) {
    INFO("registry row " << op.name);
    if (op.bench == nullptr) {
      CHECK(seen.count(op.name) == 0);
      continue;
    }
    ++timed;
    CHECK_THAT(r.output, Catch::Contains(std::string("-- ") + op.bench + " --"));
    REQUIRE(seen.count(op.name) == 1);
    const size_t sizes = cuda::is_emulated() ? 3 : 4;  // 1K, 16K, 256K, 4M (the emulator: up to 64K)
    for (const char* device : {"cpu", "cuda", "cuda+copies"}) CHECK(seen[op.name][device].size() == sizes);
  }
  CHECK(timed >= 7);  // at least the ops the crossover table reported before the registry
  CHECK(seen.count("memcpy_reference") == 1);
  fs::remove_all(dir);
}

TEST_CASE("ember bench rejects an unknown suite and bad thread counts with exit code 2", "[bench][apps]") {
  test::EmberRun r = test::run_ember("bench --suite gpu");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("--suite"));
  test::EmberRun t = test::run_ember("bench --threads -1 --suite transfers");
  CHECK(t.code == 2);
}
