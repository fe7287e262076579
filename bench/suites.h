// The benchmark suites behind `ember bench` (transfers, gemm, ops, step, conv, attention, cores, crossover) and the
// report they fill: rows of figures plus what was measured where, when and how.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/harness.h"

namespace ember::bench {

inline const std::vector<std::string>& suite_names() {
  static const std::vector<std::string> names = {"transfers", "gemm", "ops", "step", "conv", "attention",
                                                     "cores",     "crossover"};
  return names;
}

struct BenchConfig {
  std::vector<std::string> suites = {"all"};  // names from suite_names(), or "all"
  bool quick = false;                          // smaller sizes and time budgets
  int threads = 0;                             // host kernel threads; 0: every core
  bool flush_l2 = false;                       // device timers flush the L2 cache between reps
  std::string command;                         // the command line, recorded in the report
};

// The smallest measured size from which the device wins, for one op (or the step).
struct Crossover {
  std::string op;
  std::string unit;                   // what `size` counts: "bytes" or "batch"
  std::optional<double> with_copies;  // device time + its H2D/D2H copies < host time
  std::optional<double> resident;     // data already on the device
  std::string reason_with_copies;     // why there is no size (no device, never faster ...)
  std::string reason_resident;
  std::optional<double> speedup_at_largest;  // host time / device-with-copies time, largest common size
};

struct HostInfo {
  std::string cpu_model;  // /proc/cpuinfo's "model name"
  int cores = 0;          // hardware threads visible to this process
  int threads = 0;        // host kernel threads (kernels::cpu::num_threads)
  int blas_threads = 0;   // OpenBLAS's own threads inside each GEMM tile (1)
  std::string openblas_coretype;  // $OPENBLAS_CORETYPE (empty when unset)
};

struct DeviceInfo {
  bool available = false;
  std::string reason;  // why not, when unavailable
  std::string name;
  int major = 0, minor = 0, multiprocessors = 0;
  int64_t total_memory = 0, l2_bytes = 0;
  bool emulated = false;  // ember's emulated device: its figures are CPU time, never GPU performance
};

struct Report {
  std::string date;     // UTC, ISO 8601
  std::string command;
  bool quick = false;
  bool flush_l2 = false;
  std::vector<std::string> suites;  // the suites that ran, in order
  HostInfo host;
  DeviceInfo device;
  std::vector<Row> rows;
  std::vector<Crossover> crossovers;
  std::vector<std::string> failures;  // verification failures: each also marks its row unmeasured
};

// Expands "all" and checks names; ValueError naming the valid suites on an unknown one.
std::vector<std::string> resolve_suites(const std::vector<std::string>& suites);

// Runs the selected suites in order (crossover also runs ops and step when they were not selected).
// Progress goes to `log` when it is not null. Never throws for a missing GPU: device rows say why.
Report run_benchmarks(const BenchConfig& config, std::FILE* log = nullptr);

// Derives the crossover table from the ops and step rows (a pure function of the rows).
std::vector<Crossover> compute_crossovers(const std::vector<Row>& rows, const DeviceInfo& device);

// ---- the suites (bench/suite_*.cpp) -------------------------------------------------------------
// What every suite shares: the device (if any), the timers' options and the L2 flusher.
struct BenchContext {
  bool quick = false;
  DeviceInfo device;
  TimingOptions timing;
  std::unique_ptr<L2Flusher> flusher;  // set when flush_l2 and a device is available
  Report* report = nullptr;
  std::FILE* log = nullptr;
  std::optional<cuda::Stream> stream;       // the device's compute stream (when available)
  std::optional<cuda::Stream> copy_stream;  // its copy stream, for copy/compute overlap

  bool cuda() const { return device.available; }
  // The device is ember's emulator: the suites run small sizes only (its figures are CPU time, and a 4096^3
  // GEMM would take hours); they still check every device result against the host.
  bool emulated() const { return device.available && device.emulated; }
  // Adds a row; a verification failure also lands in report->failures.
  void add(Row row);
  // Records a failed CPU/CUDA comparison: the row is kept, unmeasured, and the run fails at the end.
  void fail(Row row, const std::string& message);
  void progress(const std::string& what) const;
};

// "what: max |cuda - cpu| = 0.5 > tolerance 1e-05"
std::string mismatch(const std::string& what, double diff, double tolerance);

void run_transfers(BenchContext& ctx);
void run_gemm(BenchContext& ctx);
void run_ops(BenchContext& ctx);
void run_step(BenchContext& ctx);
void run_conv(BenchContext& ctx);
void run_attention(BenchContext& ctx);
void run_cores(BenchContext& ctx);

}  // namespace ember::bench
