// CPU twins of the elementwise kernels: plain loops over contiguous arrays that the compiler vectorises, cut into
// fixed chunks for the host thread pool (each element is computed alone, so the cut changes no result).
#include "kernels/elementwise.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"

namespace ember::kernels::cpu {

namespace {
// Runs body(begin, end) over [0, n) in kElementwiseGrain chunks, as a region named after the calling kernel.
template <typename Body>
void chunks(int64_t n, Body body, const char* site = __builtin_FUNCTION()) {
  parallel_chunks(n, kElementwiseGrain, body, site);
}
}  // namespace

template <typename T>
void fill(T* out, int64_t n, T value) {
  chunks(n, [&](int64_t begin, int64_t end) { std::fill(out + begin, out + end, value); });
}

template <typename T>
void add(const T* a, const T* b, T* out, int64_t n) {
  chunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
  });
}

template <typename T>
void sub(const T* a, const T* b, T* out, int64_t n) {
  chunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = a[i] - b[i];
  });
}

template <typename T>
void mul(const T* a, const T* b, T* out, int64_t n) {
  chunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = a[i] * b[i];
  });
}

template <typename T>
void scale(const T* a, T alpha, T* out, int64_t n) {
  chunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = alpha * a[i];
  });
}

template <typename T>
void axpy(T alpha, const T* x, T* y, int64_t n) {
  chunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] += alpha * x[i];
  });
}

template <typename T>
void add_bias(const T* x, const T* bias, T* out, int64_t rows, int64_t cols) {
  const int64_t grain_rows = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, cols));
  parallel_chunks(rows, grain_rows, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const T* xr = x + r * cols;
      T* outr = out + r * cols;
      for (int64_t c = 0; c < cols; ++c) outr[c] = xr[c] + bias[c];
    }
  });
}

template <typename T>
void relu(const T* x, T* out, int64_t n) {
  chunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = x[i] > T(0) ? x[i] : T(0);
  });
}

template <typename T>
void relu_backward(const T* grad_out, const T* y, T* grad_in, int64_t n) {
  chunks(n, [&](int64_t begin, int64_t end) {
    // Both loads unconditional: the select then vectorises (a load under the condition keeps it scalar;
    // docs/benchmarks.md, "Measurements behind the code").
    for (int64_t i = begin; i < end; ++i) {
      const T g = grad_out[i];
      grad_in[i] = y[i] > T(0) ? g : T(0);
    }
  });
}

#define EMBER_INSTANTIATE(T)                                                  \
  template void fill<T>(T*, int64_t, T);                                      \
  template void add<T>(const T*, const T*, T*, int64_t);                      \
  template void sub<T>(const T*, const T*, T*, int64_t);                      \
  template void mul<T>(const T*, const T*, T*, int64_t);                      \
  template void scale<T>(const T*, T, T*, int64_t);                           \
  template void axpy<T>(T, const T*, T*, int64_t);                            \
  template void add_bias<T>(const T*, const T*, T*, int64_t, int64_t);        \
  template void relu<T>(const T*, T*, int64_t);                               \
  template void relu_backward<T>(const T*, const T*, T*, int64_t);
EMBER_INSTANTIATE(float)
EMBER_INSTANTIATE(double)
#undef EMBER_INSTANTIATE

// fill also serves the integer dtypes (zeros/ones/full of labels and images).
template void fill<int32_t>(int32_t*, int64_t, int32_t);
template void fill<int64_t>(int64_t*, int64_t, int64_t);
template void fill<uint8_t>(uint8_t*, int64_t, uint8_t);

}  // namespace ember::kernels::cpu
