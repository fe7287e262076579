// The benchmark harness: repetition policy, statistics, host (steady_clock) and device (CUDA event)
// timers, the optional L2 flush, and the result rows every suite produces.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/stream.h"
#include "core/tensor.h"

namespace ember::bench {

// What a device column says when this machine has no usable GPU: never a zero or a guess.
inline constexpr const char* kNoCudaDevice = "no CUDA device";

// Summary of repeated timings, in seconds.
struct Stats {
  double median = 0;
  double p95 = 0;   // linear interpolation between order statistics (numpy's default)
  double mean = 0;
  double min = 0;
  double cv = 0;    // sample standard deviation / mean; 0 for a single sample
  int64_t reps = 0;
};

// A pure function of the samples (seconds, any order); ValueError when there are none.
Stats compute_stats(std::vector<double> samples);

struct TimingOptions {
  int warmup = 2;            // untimed runs first (caches, allocator, cuBLAS heuristics, page faults)
  int min_reps = 20;         // at least this many timed runs ...
  int max_reps = 100000;
  double min_seconds = 0.1;  // ... and keep going while cheap runs have not filled this much time
  double max_seconds = 2.0;  // stop here even below min_reps (but never below kMinRepsFloor)
  bool flush_l2 = false;     // device timers: overwrite the L2 cache before each timed run
  // Host timer: calls shorter than this are batched (one sample = the mean of a batch of calls),
  // since the steady clock's own cost and resolution (tens of ns) would otherwise dominate.
  double min_sample_seconds = 10e-6;
};

// Fewer samples than this make no median worth printing, so the time budget never stops earlier.
inline constexpr int kMinRepsFloor = 3;

// The stop rule: true while another timed repetition should run after `reps` of them took
// `elapsed` seconds of wall time.
bool keep_going(int64_t reps, double elapsed, const TimingOptions& options);

// Times fn() with the steady clock; fn must finish its work before returning (synchronise any
// device work it queues). Returns one sample per repetition, in seconds per call; `batch` (when not
// null) receives the calls per sample.
std::vector<double> sample_host(const std::function<void()>& fn, const TimingOptions& options,
                                int64_t* batch = nullptr);

// Writes 2x the device's L2 cache size between repetitions so no run starts with warm data.
class L2Flusher {
 public:
  explicit L2Flusher(int device);
  void flush(const cuda::Stream& stream) const;
  int64_t bytes() const { return bytes_; }

 private:
  Tensor buffer_;
  int64_t bytes_ = 0;
};

// Times enqueue() with CUDA events recorded on `stream` around it (enqueue only queues work on that
// stream). Each repetition waits for its end event, so a sample includes the launch latency the
// stream saw but never queued-up work of other repetitions.
std::vector<double> sample_device(const std::function<void()>& enqueue, const cuda::Stream& stream,
                                  const TimingOptions& options, const L2Flusher* flusher);

// One measured (or unmeasurable) figure: a benchmark at one size on one device.
struct Extra {
  std::string key;   // JSON key: "pct_of_cublas", "speedup", ...
  double value = 0;
  std::string text;  // for the table's notes column: "93% of cuBLAS"
};

struct Row {
  std::string suite;   // transfers | gemm | ops | step
  std::string table;   // the sub-table inside the suite's output
  std::string name;    // what runs: "h2d", "sgemm", "add", "mlp_step"
  std::string label;   // the table's row label: "4 MiB", "1024^3"
  std::vector<std::pair<std::string, int64_t>> params;  // size parameters
  double size = 0;     // x coordinate for plots and the crossover (bytes, n or batch)
  std::string column;  // the table's column: "cpu", "cuda", "cublas", "pinned async"
  std::string device;  // cpu | cuda | cublas | cuda+copies
  std::string timer;   // steady_clock | cuda_events
  double bytes = 0;    // bytes read + written by one repetition (0: not counted)
  double flops = 0;    // floating-point operations of one repetition (0: not counted)
  std::optional<Stats> stats;  // empty: not measured, `reason` says why
  std::string reason;
  std::vector<Extra> extras;

  bool measured() const { return stats.has_value(); }
  std::optional<double> gb_per_s() const;     // bytes / median
  std::optional<double> gflop_per_s() const;  // flops / median
  std::optional<double> extra(const std::string& key) const;
};

// A copy of `row` that says why it was not measured.
Row unmeasured(Row row, std::string reason);
// Fills row.stats from samples.
Row measured(Row row, std::vector<double> samples);

// Max |a - b| over two arrays of the same length.
double max_abs_diff(const float* a, const float* b, int64_t n);
double max_abs(const float* a, int64_t n);

// "4 KiB", "1 GiB": binary sizes for byte counts; "1M", "16K" for element counts.
std::string format_bytes(double bytes);
std::string format_count(double n);
// "12.3 us", "4.56 ms": three significant digits with an adapted unit.
std::string format_seconds(double seconds);

}  // namespace ember::bench
