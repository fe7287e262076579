// GELU, PyTorch's two forms: approximate "none" (0.5 x (1 + erf(x / sqrt 2))) and "tanh"
// (0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))), forward and backward over contiguous arrays of n elements.
// The per-element math below is shared by both twins; it never relies on infinities (1 - tanh^2, not
// 1 / cosh^2), so it holds under fast-math flags and for large |x|.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

enum class GeluApproximate { None, Tanh };

namespace gelu_math {

EMBER_HOST_DEVICE inline float erf_(float v) { return ::erff(v); }
EMBER_HOST_DEVICE inline double erf_(double v) { return ::erf(v); }
EMBER_HOST_DEVICE inline float exp_(float v) { return ::expf(v); }
EMBER_HOST_DEVICE inline double exp_(double v) { return ::exp(v); }
EMBER_HOST_DEVICE inline float tanh_(float v) { return ::tanhf(v); }
EMBER_HOST_DEVICE inline double tanh_(double v) { return ::tanh(v); }

inline constexpr double kInvSqrt2 = 0.70710678118654752440;      // 1 / sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;    // 1 / sqrt(2 pi)
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
inline constexpr double kCubic = 0.044715;

template <typename T> EMBER_HOST_DEVICE inline T tanh_arg(T x) { return T(kSqrt2OverPi) * (x + T(kCubic) * x * x * x); }

template <typename T> EMBER_HOST_DEVICE inline T forward(T x, GeluApproximate approximate) {
  if (approximate == GeluApproximate::Tanh) return T(0.5) * x * (T(1) + tanh_(tanh_arg(x)));
  return T(0.5) * x * (T(1) + erf_(x * T(kInvSqrt2)));
}

// d gelu / dx: Phi(x) + x phi(x) for the exact form; for tanh, with t = tanh(u):
// 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx.
template <typename T> EMBER_HOST_DEVICE inline T derivative(T x, GeluApproximate approximate) {
  if (approximate == GeluApproximate::Tanh) {
    const T t = tanh_(tanh_arg(x));
    const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kCubic) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * ((T(1) - t) * (T(1) + t)) * du;
  }
  const T cdf = T(0.5) * (T(1) + erf_(x * T(kInvSqrt2)));
  const T pdf = T(kInvSqrt2Pi) * exp_(T(-0.5) * x * x);
  return cdf + x * pdf;
}

}  // namespace gelu_math

namespace cpu {
template <typename T> void gelu(const T* x, T* out, int64_t n, GeluApproximate approximate);
// grad_in = grad_out * gelu'(x), x the forward's input.
template <typename T>
void gelu_backward(const T* grad_out, const T* x, T* grad_in, int64_t n, GeluApproximate approximate);
}  // namespace cpu

namespace cuda {
template <typename T> void gelu(const T* x, T* out, int64_t n, GeluApproximate approximate, Stream stream);
template <typename T>
void gelu_backward(const T* grad_out, const T* x, T* grad_in, int64_t n, GeluApproximate approximate, Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
