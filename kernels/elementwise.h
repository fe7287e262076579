// Elementwise kernels: fill, add/sub/mul, scale, axpy, row-vector bias, ReLU forward/backward.
// cpu:: and cuda:: twins share a signature; the CUDA launchers take the stream last.
// All pointers are to contiguous arrays of n elements; out may alias an input.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

#define EMBER_ELEMENTWISE_API(...)                                                               \
  template <typename T> void fill(T* out, int64_t n, T value __VA_ARGS__);                               \
  template <typename T> void add(const T* a, const T* b, T* out, int64_t n __VA_ARGS__);                 \
  template <typename T> void sub(const T* a, const T* b, T* out, int64_t n __VA_ARGS__);                 \
  template <typename T> void mul(const T* a, const T* b, T* out, int64_t n __VA_ARGS__);                 \
  /* out = alpha * a */                                                                                   \
  template <typename T> void scale(const T* a, T alpha, T* out, int64_t n __VA_ARGS__);                  \
  /* y += alpha * x (gradient accumulation) */                                                            \
  template <typename T> void axpy(T alpha, const T* x, T* y, int64_t n __VA_ARGS__);                     \
  /* out(rows, cols) = x(rows, cols) + bias(cols), broadcast over rows */                                 \
  template <typename T> void add_bias(const T* x, const T* bias, T* out, int64_t rows, int64_t cols __VA_ARGS__); \
  template <typename T> void relu(const T* x, T* out, int64_t n __VA_ARGS__);                            \
  /* grad_in = grad_out where the forward output y > 0, else 0 */                                         \
  template <typename T> void relu_backward(const T* grad_out, const T* y, T* grad_in, int64_t n __VA_ARGS__);

namespace cpu {
EMBER_ELEMENTWISE_API()
}  // namespace cpu

namespace cuda {
EMBER_ELEMENTWISE_API(, Stream stream)
}  // namespace cuda

#undef EMBER_ELEMENTWISE_API

}  // namespace ember::kernels
