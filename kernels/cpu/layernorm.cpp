// Host layer normalisation: row statistics in double, rows cut into fixed chunks of the host pool, and a
// backward whose weight and bias gradients add per-chunk partials in chunk order (bits independent of threads).
#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"

namespace ember::kernels::cpu {

#if EMBER_HOST_AVX512 && !defined(EMBER_ISA_AVX512)
namespace avx512 {  // the entry points of this file's AVX-512 build (cpu/layernorm_avx512.cpp)
template <typename T> void layernorm_forward(const LayerNormForwardArgs<T>& a);
template <typename T> void layernorm_backward(const LayerNormBackwardArgs<T>& a);
}  // namespace avx512
#endif

EMBER_ISA_BEGIN

namespace {

// Rows per task: about kElementwiseGrain elements, from the sizes alone.
int64_t rows_per_chunk(int64_t cols) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, cols)); }

struct RowStats {
  double mean, rstd;
};

// Two passes (mean, then the centred sum of squares): no cancellation for rows far from zero.
template <typename T> RowStats row_stats(const T* x, int64_t cols, double eps) {
  double s = 0;
  for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(x[c]);
  const double mean = s / static_cast<double>(cols);
  double ss = 0;
  for (int64_t c = 0; c < cols; ++c) {
    const double d = static_cast<double>(x[c]) - mean;
    ss += d * d;
  }
  return {mean, 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps)};
}

template <typename T> void forward_row(const LayerNormForwardArgs<T>& a, int64_t r) {
  const T* x = a.x + r * a.cols;
  T* y = a.y + r * a.cols;
  const RowStats st = row_stats(x, a.cols, static_cast<double>(a.eps));
  const T mean = static_cast<T>(st.mean), rstd = static_cast<T>(st.rstd);
  for (int64_t c = 0; c < a.cols; ++c) {
    const T xhat = (x[c] - mean) * rstd;
    y[c] = xhat * (a.weight ? a.weight[c] : T(1)) + (a.bias ? a.bias[c] : T(0));
  }
  a.mean[r] = mean;
  a.rstd[r] = rstd;
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight; adds dy * xhat and dy to the
// chunk's partial sums (dw, db: cols each).
template <typename T> void backward_row(const LayerNormBackwardArgs<T>& a, int64_t r, double* dw, double* db) {
  const T* x = a.x + r * a.cols;
  const T* dy = a.dy + r * a.cols;
  T* dx = a.dx + r * a.cols;
  const T mean = a.mean[r], rstd = a.rstd[r];
  double sum_g = 0, sum_gx = 0;
  for (int64_t c = 0; c < a.cols; ++c) {
    const T xhat = (x[c] - mean) * rstd;
    const T g = dy[c] * (a.weight ? a.weight[c] : T(1));
    sum_g += static_cast<double>(g);
    sum_gx += static_cast<double>(g) * static_cast<double>(xhat);
    dw[c] += static_cast<double>(dy[c]) * static_cast<double>(xhat);
    db[c] += static_cast<double>(dy[c]);
  }
  const T mean_g = static_cast<T>(sum_g / static_cast<double>(a.cols));
  const T mean_gx = static_cast<T>(sum_gx / static_cast<double>(a.cols));
  for (int64_t c = 0; c < a.cols; ++c) {
    const T xhat = (x[c] - mean) * rstd;
    const T g = dy[c] * (a.weight ? a.weight[c] : T(1));
    dx[c] = rstd * (g - mean_g - xhat * mean_gx);
  }
}

}  // namespace

template <typename T> void layernorm_forward(const LayerNormForwardArgs<T>& a) {
  EMBER_ISA_DISPATCH(layernorm_forward<T>(a));
  if (a.rows <= 0 || a.cols <= 0) return;
  parallel_chunks(a.rows, rows_per_chunk(a.cols), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) forward_row(a, r);
  });
}

template <typename T> void layernorm_backward(const LayerNormBackwardArgs<T>& a) {
  EMBER_ISA_DISPATCH(layernorm_backward<T>(a));
  if (a.rows <= 0 || a.cols <= 0) return;
  const int64_t grain = rows_per_chunk(a.cols);
  const int64_t chunks = chunk_count(a.rows, grain);
  const auto width = static_cast<size_t>(a.cols);
  // Partials (chunks, 2, cols): each task owns its chunk's two rows, so no task reads another's.
  std::vector<double> partial(static_cast<size_t>(chunks) * 2 * width, 0.0);
  parallel_for(chunks, [&](int64_t chunk) {
    double* dw = partial.data() + static_cast<size_t>(chunk) * 2 * width;
    const int64_t last = std::min(a.rows, (chunk + 1) * grain);
    for (int64_t r = chunk * grain; r < last; ++r) backward_row(a, r, dw, dw + width);
  });
  for (size_t c = 0; c < width; ++c) {
    double dw = 0, db = 0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      dw += partial[static_cast<size_t>(chunk) * 2 * width + c];
      db += partial[(static_cast<size_t>(chunk) * 2 + 1) * width + c];
    }
    if (a.dweight) a.dweight[c] += static_cast<T>(dw);
    if (a.dbias) a.dbias[c] += static_cast<T>(db);
  }
}

template void layernorm_forward<float>(const LayerNormForwardArgs<float>&);
template void layernorm_forward<double>(const LayerNormForwardArgs<double>&);
template void layernorm_backward<float>(const LayerNormBackwardArgs<float>&);
template void layernorm_backward<double>(const LayerNormBackwardArgs<double>&);

EMBER_ISA_END
}  // namespace ember::kernels::cpu
