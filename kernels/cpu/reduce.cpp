// Host reductions: sum/mean, column sums (bias gradients), row argmax and the correct-prediction count.
#include "kernels/reduce.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace ember::kernels::cpu {

namespace {

// Independent accumulators break the add dependency chain so the compiler can vectorise the loop
// without -ffast-math (the lanes are combined in a fixed order, so results stay reproducible).
constexpr int64_t kLanes = 8;
// Lane sums are flushed into the total every block, which bounds the length of any single float
// accumulation chain (blocked summation: error grows with n / kBlock, not n).
constexpr int64_t kBlock = 4096;
// sum_rows keeps at most this many float64 column accumulators (8 KiB, resident in L1).
constexpr int64_t kColumnTile = 1024;
// sum_rows reads this many far-apart row ranges at once. Each accumulator load/store then absorbs
// kStreams inputs, and every range is one long sequential stream that the hardware prefetcher
// follows. (A loop over one row at a time, which GCC unroll-and-jams into two adjacent rows with an
// accumulator round trip per element, is several times slower on large inputs.)
constexpr int64_t kStreams = 4;
// Narrow matrices fold several rows into one run of accumulators, but keep at least this many
// runs so that small inputs are still split over the streams.
constexpr int64_t kMinRuns = 4 * kStreams;

template <typename T> double sum_block(const T* x, int64_t n) {
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] += static_cast<double>(x[i + j]);
  double tail = 0;
  for (; i < n; ++i) tail += static_cast<double>(x[i]);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])) + tail;
}

// acc(n) += a(n); kept out of line (as is add_runs) so that the compiler does not unroll-and-jam the
// caller's loop into reading adjacent rows together, the access pattern this code exists to avoid.
template <typename T> [[gnu::noinline]] void add_run(const T* a, int64_t n, double* acc) {
  for (int64_t j = 0; j < n; ++j) acc[j] += static_cast<double>(a[j]);
}

template <typename T>
[[gnu::noinline]] void add_runs(const T* a, const T* b, const T* c, const T* d, int64_t n, double* acc) {
  for (int64_t j = 0; j < n; ++j)
    acc[j] += (static_cast<double>(a[j]) + static_cast<double>(b[j])) +
              (static_cast<double>(c[j]) + static_cast<double>(d[j]));
}

// acc(n) += sum over s < count of the run x + s * stride (n elements each), in a fixed order that
// depends only on the shape: run s of each quarter together, then the runs left over one by one.
template <typename T> void sum_runs(const T* x, int64_t count, int64_t stride, int64_t n, double* acc) {
  static_assert(kStreams == 4, "add_runs takes four runs");
  const int64_t quarter = count / kStreams;
  const int64_t gap = quarter * stride;
  for (int64_t s = 0; s < quarter; ++s) {
    const T* a = x + s * stride;
    add_runs(a, a + gap, a + 2 * gap, a + 3 * gap, n, acc);
  }
  for (int64_t s = kStreams * quarter; s < count; ++s) add_run(x + s * stride, n, acc);
}

// NaN counts as the largest value (PyTorch's argmax); among equals the earlier index wins because
// only a strictly better value replaces the current best.
template <typename T> bool beats(T candidate, T best) {
  return candidate > best || (std::isnan(candidate) && !std::isnan(best));
}

template <typename T> int64_t argmax_row(const T* row, int64_t cols) {
  int64_t best = 0;
  for (int64_t c = 1; c < cols; ++c)
    if (beats(row[c], row[best])) best = c;
  return best;
}

}  // namespace

template <typename T> void sum(const T* x, int64_t n, T scale, T* out) {
  double total = 0;
  for (int64_t start = 0; start < n; start += kBlock) total += sum_block(x + start, std::min(kBlock, n - start));
  out[0] = static_cast<T>(total * static_cast<double>(scale));
}

// Columns are summed in tiles of kColumnTile accumulators. A narrow matrix instead treats `group`
// consecutive rows as one run of group * cols elements (accumulator g * cols + c holds column c of
// rows g, g + group, ...), and folds those partial sums at the end, so runs stay long enough to
// stream. Everything accumulates in float64 in an order fixed by the shape alone.
template <typename T> void sum_rows(const T* x, int64_t rows, int64_t cols, T beta, T* out) {
  if (cols <= 0) return;
  const int64_t group = cols >= kColumnTile ? 1 : std::max<int64_t>(1, std::min(kColumnTile / cols, rows / kMinRuns));
  const int64_t run = group * cols;         // elements per run; == cols when group == 1
  const int64_t full_runs = rows / group;  // the remaining rows % group rows form a shorter run
  alignas(64) double acc[kColumnTile];      // (group, width) while a tile is summed
  for (int64_t c0 = 0; c0 < cols; c0 += kColumnTile) {
    const int64_t width = std::min(kColumnTile, cols - c0);  // == cols when group > 1
    const int64_t n = group * width;
    std::fill(acc, acc + n, 0.0);
    sum_runs(x + c0, full_runs, run, n, acc);
    if (group > 1) add_run(x + full_runs * run, (rows - full_runs * group) * cols, acc);
    for (int64_t g = 1; g < group; ++g)
      for (int64_t j = 0; j < width; ++j) acc[j] += acc[g * width + j];
    T* o = out + c0;
    if (beta == T(0)) {
      for (int64_t j = 0; j < width; ++j) o[j] = static_cast<T>(acc[j]);
    } else {
      const double b = static_cast<double>(beta);
      for (int64_t j = 0; j < width; ++j) o[j] = static_cast<T>(b * static_cast<double>(o[j]) + acc[j]);
    }
  }
}

template <typename T> void argmax_rows(const T* x, int64_t rows, int64_t cols, int64_t* out) {
  EMBER_ASSERT(cols > 0 || rows == 0, "argmax_rows over rows with no columns");
  for (int64_t r = 0; r < rows; ++r) out[r] = argmax_row(x + r * cols, cols);
}

template <typename T, typename L>
void count_correct(const T* logits, const L* labels, int64_t rows, int64_t cols, int64_t* out) {
  EMBER_ASSERT(cols > 0 || rows == 0, "count_correct over rows with no columns");
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r)
    correct += argmax_row(logits + r * cols, cols) == static_cast<int64_t>(labels[r]) ? 1 : 0;
  out[0] = correct;
}

#define EMBER_REDUCE_CPU(T)                                                              \
  template void sum<T>(const T*, int64_t, T, T*);                                        \
  template void sum_rows<T>(const T*, int64_t, int64_t, T, T*);                          \
  template void argmax_rows<T>(const T*, int64_t, int64_t, int64_t*);                    \
  template void count_correct<T, int32_t>(const T*, const int32_t*, int64_t, int64_t, int64_t*); \
  template void count_correct<T, int64_t>(const T*, const int64_t*, int64_t, int64_t, int64_t*);
EMBER_REDUCE_CPU(float)
EMBER_REDUCE_CPU(double)
#undef EMBER_REDUCE_CPU

}  // namespace ember::kernels::cpu
