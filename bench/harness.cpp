// Repetition policy, statistics and the two timers of the benchmark harness.
#include "bench/harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "base/error.h"
#include "core/cuda_runtime.h"
#include "core/ops.h"

namespace ember::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Owns a timing event; destroying it never throws.

}  // namespace

Stats compute_stats(std::vector<double> samples) {
  EMBER_CHECK(!samples.empty(), ValueError, "compute_stats: no samples");
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  auto quantile = [&](double q) {
    double pos = q * static_cast<double>(n - 1);
    size_t lo = static_cast<size_t>(std::floor(pos));
    size_t hi = std::min(lo + 1, n - 1);
    return samples[lo] + (pos - static_cast<double>(lo)) * (samples[hi] - samples[lo]);
  };
  Stats s;
  s.reps = static_cast<int64_t>(n);
  s.median = quantile(0.5);
  s.p95 = quantile(0.95);
  s.min = samples.front();
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n);
  if (n > 1 && s.mean != 0) {
    double sq = 0;
    for (double x : samples) sq += (x - s.mean) * (x - s.mean);
    s.cv = std::sqrt(sq / static_cast<double>(n - 1)) / s.mean;
  }
  return s;
}

bool keep_going(int64_t reps, double elapsed, const TimingOptions& o) {
  if (reps < kMinRepsFloor) return true;
  if (reps >= o.max_reps) return false;
  if (elapsed >= o.max_seconds) return false;
  return reps < o.min_reps || elapsed < o.min_seconds;
}

std::vector<double> sample_host(const std::function<void()>& fn, const TimingOptions& o, int64_t* batch_out) {
  // The last warm-up call (at least one) sizes the batch.
  double last = 0;
  auto warm_start = Clock::now();
  for (int i = 0; i < std::max(o.warmup, 1) && (i == 0 || seconds_since(warm_start) < o.max_seconds / 4); ++i) {
    auto t0 = Clock::now();
    fn();
    last = seconds_since(t0);
  }
  int64_t batch = 1;
  if (last < o.min_sample_seconds)
    batch = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(o.min_sample_seconds / std::max(last, 1e-9))), 1, 10000);
  if (batch_out != nullptr) *batch_out = batch;
  std::vector<double> samples;
  auto start = Clock::now();
  while (keep_going(static_cast<int64_t>(samples.size()), seconds_since(start), o)) {
    auto t0 = Clock::now();
    for (int64_t i = 0; i < batch; ++i) fn();
    samples.push_back(seconds_since(t0) / static_cast<double>(batch));
  }
  return samples;
}

L2Flusher::L2Flusher(int device) {
  bytes_ = 2 * static_cast<int64_t>(cuda::runtime::l2_cache_bytes(device));
  buffer_ = Tensor::empty({std::max<int64_t>(bytes_ / 4, 1)}, DType::F32, Device::cuda(device));
}

void L2Flusher::flush(const cuda::Stream& stream) const {
  EMBER_ASSERT(stream.handle() == cuda::Stream::compute(stream.device()).handle(),
               "the L2 flush is an op: it runs on the compute stream");
  Tensor buffer = buffer_;
  ops::fill_(buffer, 0);
}

std::vector<double> sample_device(const std::function<void()>& enqueue, const cuda::Stream& stream,
                                  const TimingOptions& o, const L2Flusher* flusher) {
  auto warm_start = Clock::now();
  for (int i = 0; i < o.warmup && seconds_since(warm_start) < o.max_seconds / 4; ++i) {
    enqueue();
    stream.synchronize();
  }
  cuda::Event begin(/*timing=*/true), end(/*timing=*/true);
  std::vector<double> samples;
  auto start = Clock::now();
  while (keep_going(static_cast<int64_t>(samples.size()), seconds_since(start), o)) {
    if (flusher != nullptr) flusher->flush(stream);
    begin.record(stream);
    enqueue();
    end.record(stream);
    end.synchronize();
    samples.push_back(cuda::Event::elapsed_ms(begin, end) * 1e-3);
  }
  return samples;
}

std::optional<double> Row::gb_per_s() const {
  if (!stats || bytes <= 0 || stats->median <= 0) return std::nullopt;
  return bytes / stats->median * 1e-9;
}

std::optional<double> Row::gflop_per_s() const {
  if (!stats || flops <= 0 || stats->median <= 0) return std::nullopt;
  return flops / stats->median * 1e-9;
}

std::optional<double> Row::extra(const std::string& key) const {
  for (const Extra& e : extras)
    if (e.key == key) return e.value;
  return std::nullopt;
}

Row unmeasured(Row row, std::string reason) {
  row.stats.reset();
  row.reason = std::move(reason);
  return row;
}

Row measured(Row row, std::vector<double> samples) {
  row.stats = compute_stats(std::move(samples));
  row.reason.clear();
  return row;
}

double max_abs_diff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (!(d <= m)) m = d;  // a NaN on either side wins and fails the check
  }
  return m;
}

double max_abs(const float* a, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(a[i])));
  return m;
}

namespace {
std::string scaled(double v, const char* const* units, int count, double step) {
  int u = 0;
  while (u + 1 < count && std::fabs(v) >= step) v /= step, ++u;
  char buf[48];
  if (v == std::floor(v)) std::snprintf(buf, sizeof buf, "%.0f%s%s", v, *units[u] ? " " : "", units[u]);
  else std::snprintf(buf, sizeof buf, "%.3g%s%s", v, *units[u] ? " " : "", units[u]);
  return buf;
}
}  // namespace

std::string format_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  return scaled(bytes, units, 5, 1024);
}

std::string format_count(double n) {
  static const char* const units[] = {"", "K", "M", "G"};
  std::string s = scaled(n, units, 4, 1024);
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

std::string format_seconds(double seconds) {
  char buf[32];
  if (seconds < 1e-6) std::snprintf(buf, sizeof buf, "%.3g ns", seconds * 1e9);
  else if (seconds < 1e-3) std::snprintf(buf, sizeof buf, "%.3g us", seconds * 1e6);
  else if (seconds < 1) std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
  else std::snprintf(buf, sizeof buf, "%.3g s", seconds);
  return buf;
}

}  // namespace ember::bench
