// Host softmax / log-softmax (forward and backward) and the fused softmax-cross-entropy.
#include "kernels/softmax_xent.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace ember::kernels::cpu {

namespace {

// Row maximum; subtracting it keeps exp() in range for logits of any magnitude (+-1e4 included).
template <typename T> T row_max(const T* x, int64_t cols) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t c = 0; c < cols; ++c) m = x[c] > m ? x[c] : m;
  return m;
}

// Writes e[c] = exp(x[c] - m) and returns their sum; the sum is kept in double so float rows of
// thousands of classes lose nothing to accumulation.
template <typename T> double exp_shifted(const T* x, T m, T* e, int64_t cols) {
  double s = 0;
  for (int64_t c = 0; c < cols; ++c) {
    e[c] = std::exp(x[c] - m);
    s += static_cast<double>(e[c]);
  }
  return s;
}

template <typename T> void softmax_row(const T* x, T* y, int64_t cols) {
  const T m = row_max(x, cols);
  const T inv = static_cast<T>(1.0 / exp_shifted(x, m, y, cols));
  for (int64_t c = 0; c < cols; ++c) y[c] *= inv;
}

template <typename L> void check_label(L label, int64_t row, int64_t cols) {
  const auto l = static_cast<int64_t>(label);
  EMBER_CHECK(l >= 0 && l < cols, ValueError, "cross_entropy(): label ", l, " at row ", row,
              " is out of range for ", cols, " classes (valid 0..", cols - 1, ")");
}

}  // namespace

template <typename T> void softmax(const T* x, T* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * cols, y + r * cols, cols);
}

template <typename T> void log_softmax(const T* x, T* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const T m = row_max(xr, cols);
    // exp values go to y as scratch and are overwritten below.
    const T log_sum = static_cast<T>(std::log(exp_shifted(xr, m, yr, cols)));
    // (x - m) - log_sum rather than x - (m + log_sum): the shifted logit is exact, so large
    // logits keep their small differences.
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) - log_sum;
  }
}

template <typename T> void softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* yr = y + r * cols;
    const T* dyr = dy + r * cols;
    T* dxr = dx + r * cols;
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c) dot += static_cast<double>(dyr[c]) * static_cast<double>(yr[c]);
    const T d = static_cast<T>(dot);
    for (int64_t c = 0; c < cols; ++c) dxr[c] = yr[c] * (dyr[c] - d);
  }
}

template <typename T> void log_softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* yr = y + r * cols;
    const T* dyr = dy + r * cols;
    T* dxr = dx + r * cols;
    double total = 0;
    for (int64_t c = 0; c < cols; ++c) total += static_cast<double>(dyr[c]);
    const T s = static_cast<T>(total);
    for (int64_t c = 0; c < cols; ++c) dxr[c] = dyr[c] - std::exp(yr[c]) * s;
  }
}

template <typename T, typename L>
void softmax_xent_forward(const T* logits, const L* labels, T* probs, T* row_loss, int64_t rows, int64_t cols) {
  // Every label is checked before anything is written, so a bad batch leaves the outputs untouched.
  for (int64_t r = 0; r < rows; ++r) check_label(labels[r], r, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = logits + r * cols;
    T* pr = probs + r * cols;
    const T m = row_max(xr, cols);
    const double s = exp_shifted(xr, m, pr, cols);
    const T inv = static_cast<T>(1.0 / s);
    for (int64_t c = 0; c < cols; ++c) pr[c] *= inv;
    // logsumexp - x[label] = log(s) - (x[label] - m): no large cancellation for big logits.
    row_loss[r] = static_cast<T>(std::log(s)) - (xr[static_cast<int64_t>(labels[r])] - m);
  }
}

template <typename T, typename L>
void softmax_xent_backward(const T* probs, const L* labels, T grad_scale, T* grad_logits, int64_t rows,
                           int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) check_label(labels[r], r, cols);
  const int64_t n = rows * cols;
  for (int64_t i = 0; i < n; ++i) grad_logits[i] = probs[i] * grad_scale;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = r * cols + static_cast<int64_t>(labels[r]);
    grad_logits[i] = (probs[i] - T(1)) * grad_scale;
  }
}

#define EMBER_SOFTMAX_CPU(T)                                                                          \
  template void softmax<T>(const T*, T*, int64_t, int64_t);                                           \
  template void log_softmax<T>(const T*, T*, int64_t, int64_t);                                       \
  template void softmax_backward<T>(const T*, const T*, T*, int64_t, int64_t);                        \
  template void log_softmax_backward<T>(const T*, const T*, T*, int64_t, int64_t);                    \
  template void softmax_xent_forward<T, int32_t>(const T*, const int32_t*, T*, T*, int64_t, int64_t); \
  template void softmax_xent_forward<T, int64_t>(const T*, const int64_t*, T*, T*, int64_t, int64_t); \
  template void softmax_xent_backward<T, int32_t>(const T*, const int32_t*, T, T*, int64_t, int64_t); \
  template void softmax_xent_backward<T, int64_t>(const T*, const int64_t*, T, T*, int64_t, int64_t);
EMBER_SOFTMAX_CPU(float)
EMBER_SOFTMAX_CPU(double)
#undef EMBER_SOFTMAX_CPU

}  // namespace ember::kernels::cpu
