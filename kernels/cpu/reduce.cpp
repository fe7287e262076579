// Host reductions: sum/mean, column sums (bias gradients), row argmax and the correct-prediction count.
#include "kernels/reduce.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ember::kernels::cpu {

namespace {

// Independent accumulators break the add dependency chain so the compiler can vectorise the loop
// without -ffast-math (the lanes are combined in a fixed order, so results stay reproducible).
constexpr int64_t kLanes = 8;
// Lane sums are flushed into the total every block, which bounds the length of any single float
// accumulation chain (blocked summation: error grows with n / kBlock, not n).
constexpr int64_t kBlock = 4096;
// Columns summed together in sum_rows: the accumulators stay in L1 while rows stream past.
constexpr int64_t kColumnTile = 256;

template <typename T> double sum_block(const T* x, int64_t n) {
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] += static_cast<double>(x[i + j]);
  double tail = 0;
  for (; i < n; ++i) tail += static_cast<double>(x[i]);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])) + tail;
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

template <typename T> void sum_rows(const T* x, int64_t rows, int64_t cols, T beta, T* out) {
  for (int64_t c0 = 0; c0 < cols; c0 += kColumnTile) {
    const int64_t width = std::min(kColumnTile, cols - c0);
    double acc[kColumnTile] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * cols + c0;
      for (int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(row[j]);
    }
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
