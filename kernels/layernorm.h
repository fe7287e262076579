// Layer normalisation over the last dim of (rows, cols) arrays, PyTorch's LayerNorm: the forward saves each
// row's mean and rstd = 1 / sqrt(biased variance + eps); the backward recomputes the normalised input from them.
// weight and bias (cols) may be null (elementwise_affine=False: scale 1, shift 0). All arrays contiguous.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

template <typename T>
struct LayerNormForwardArgs {
  const T* x;       // (rows, cols)
  const T* weight;  // (cols) or null
  const T* bias;    // (cols) or null
  T* y;             // (rows, cols)
  T* mean;          // (rows)
  T* rstd;          // (rows)
  int64_t rows, cols;
  T eps;
};

template <typename T>
struct LayerNormBackwardArgs {
  const T* x;       // (rows, cols): the forward's input
  const T* dy;      // (rows, cols)
  const T* weight;  // (cols) or null
  const T* mean;    // (rows): the forward's
  const T* rstd;    // (rows)
  T* dx;            // (rows, cols), overwritten
  T* dweight;       // (cols): += sum over rows of dy * xhat; may be null
  T* dbias;         // (cols): += sum over rows of dy; may be null
  int64_t rows, cols;
};

namespace cpu {
// Row sums in double; rows cut into tasks of the host pool by the sizes alone.
template <typename T> void layernorm_forward(const LayerNormForwardArgs<T>& a);
// dweight/dbias: per-chunk partial sums (chunks fixed by the sizes) added in chunk order, so the bits do
// not depend on the thread count.
template <typename T> void layernorm_backward(const LayerNormBackwardArgs<T>& a);
}  // namespace cpu

namespace cuda {
// A warp per row (two passes over the row: mean, then the centred variance).
template <typename T> void layernorm_forward(const LayerNormForwardArgs<T>& a, Stream stream);
// dx: a warp per row. dweight/dbias: a block per 32 columns whose threads sum fixed slices of the rows,
// then add the slices in a fixed order: no atomics, the same bits every run.
template <typename T> void layernorm_backward(const LayerNormBackwardArgs<T>& a, Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
