// Reductions: sum/mean over all elements, sum over dim 0 (bias gradients), argmax over the last
// dim, count of correct predictions. CUDA versions are deterministic: fixed-order tree
// reductions, no float atomics.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

namespace cpu {
// out[0] = scale * sum(x[0..n)); mean is scale = 1/n.
template <typename T> void sum(const T* x, int64_t n, T scale, T* out);
// out(cols) = beta * out + sum over rows of x(rows, cols); beta == 0 does not read out.
template <typename T> void sum_rows(const T* x, int64_t rows, int64_t cols, T beta, T* out);
// out(rows) = index of the largest value in each row (the first one on ties).
template <typename T> void argmax_rows(const T* x, int64_t rows, int64_t cols, int64_t* out);
// out[0] = number of rows whose argmax equals the label (labels int32 or int64).
template <typename T, typename L> void count_correct(const T* logits, const L* labels, int64_t rows, int64_t cols,
                                                     int64_t* out);
}  // namespace cpu

namespace cuda {
// Scratch space (in elements of T) that sum() needs for n inputs; the caller allocates it.
size_t sum_workspace_elems(int64_t n);
template <typename T> void sum(const T* x, int64_t n, T scale, T* out, T* workspace, Stream stream);
template <typename T> void sum_rows(const T* x, int64_t rows, int64_t cols, T beta, T* out, Stream stream);
template <typename T> void argmax_rows(const T* x, int64_t rows, int64_t cols, int64_t* out, Stream stream);
template <typename T, typename L> void count_correct(const T* logits, const L* labels, int64_t rows, int64_t cols,
                                                     int64_t* out, Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
