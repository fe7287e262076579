// Host GELU forward and backward: one pass each, cut into kElementwiseGrain chunks of the host pool (every
// element is computed alone, so the cut changes no result). The form is chosen once per call, outside the loop.
// float runs 4 elements at a time on vecmath's exp and erf (kernels/cpu/vecmath.h: a few ulp from libm, the
// CUDA twin's erff/expf/tanhf agree within the registry's 1e-6), 1 -+ tanh from exp(2u) (saturating for large
// |u|); the tail runs the same functions' scalar forms. double keeps gelu_math's libm calls.
#include "kernels/gelu.h"

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vecmath.h"

namespace ember::kernels::cpu {

namespace {

namespace vm = vecmath;

// gelu_math's formulas for F = float or f32x4 on vecmath's functions. With e = exp(2u): 1 - tanh(u) = 2 / (e + 1)
// and 1 + tanh(u) = 2 e / (e + 1), each without cancellation (2 - 2 / (e + 1) where e > 1, so e = inf gives 2).
template <typename F> struct OneMinusPlus {
  F minus, plus;  // 1 - tanh(u), 1 + tanh(u)
};
template <typename F> OneMinusPlus<F> one_minus_plus_tanh(F u) {
  const F e = vm::exp(u + u);
  const F r = 1.0f / (e + 1.0f);
  return {r + r, e > 1.0f ? 2.0f - (r + r) : (e + e) * r};
}

template <typename F> F tanh_arg(F x) {
  return float(gelu_math::kSqrt2OverPi) * (x + float(gelu_math::kCubic) * x * x * x);
}

template <GeluApproximate kForm, typename F> F forward_fast(F x) {
  if constexpr (kForm == GeluApproximate::Tanh) return 0.5f * x * one_minus_plus_tanh(tanh_arg(x)).plus;
  else return 0.5f * x * (1.0f + vm::erf(x * float(gelu_math::kInvSqrt2)));
}

template <GeluApproximate kForm, typename F> F derivative_fast(F x) {
  if constexpr (kForm == GeluApproximate::Tanh) {
    const OneMinusPlus<F> t = one_minus_plus_tanh(tanh_arg(x));
    const F du = float(gelu_math::kSqrt2OverPi) * (1.0f + float(3 * gelu_math::kCubic) * x * x);
    return 0.5f * t.plus + 0.5f * x * (t.minus * t.plus) * du;
  } else {
    const F cdf = 0.5f * (1.0f + vm::erf(x * float(gelu_math::kInvSqrt2)));
    const F pdf = float(gelu_math::kInvSqrt2Pi) * vm::exp(-0.5f * x * x);
    return cdf + x * pdf;
  }
}

template <GeluApproximate kForm, typename T> void forward_chunk(const T* x, T* out, int64_t begin, int64_t end) {
  int64_t i = begin;
  if constexpr (sizeof(T) == 4) {
    for (; i + 4 <= end; i += 4) vm::store4(out + i, forward_fast<kForm>(vm::load4(x + i)));
    for (; i < end; ++i) out[i] = forward_fast<kForm>(x[i]);
  } else {
    for (; i < end; ++i) out[i] = gelu_math::forward(x[i], kForm);
  }
}

template <GeluApproximate kForm, typename T>
void backward_chunk(const T* grad_out, const T* x, T* grad_in, int64_t begin, int64_t end) {
  int64_t i = begin;
  if constexpr (sizeof(T) == 4) {
    for (; i + 4 <= end; i += 4)
      vm::store4(grad_in + i, vm::load4(grad_out + i) * derivative_fast<kForm>(vm::load4(x + i)));
    for (; i < end; ++i) grad_in[i] = grad_out[i] * derivative_fast<kForm>(x[i]);
  } else {
    for (; i < end; ++i) grad_in[i] = grad_out[i] * gelu_math::derivative(x[i], kForm);
  }
}

}  // namespace

template <typename T> void gelu(const T* x, T* out, int64_t n, GeluApproximate approximate) {
  parallel_chunks(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    if (approximate == GeluApproximate::Tanh) forward_chunk<GeluApproximate::Tanh>(x, out, begin, end);
    else forward_chunk<GeluApproximate::None>(x, out, begin, end);
  });
}

template <typename T>
void gelu_backward(const T* grad_out, const T* x, T* grad_in, int64_t n, GeluApproximate approximate) {
  parallel_chunks(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    if (approximate == GeluApproximate::Tanh) backward_chunk<GeluApproximate::Tanh>(grad_out, x, grad_in, begin, end);
    else backward_chunk<GeluApproximate::None>(grad_out, x, grad_in, begin, end);
  });
}

template void gelu<float>(const float*, float*, int64_t, GeluApproximate);
template void gelu<double>(const double*, double*, int64_t, GeluApproximate);
template void gelu_backward<float>(const float*, const float*, float*, int64_t, GeluApproximate);
template void gelu_backward<double>(const double*, const double*, double*, int64_t, GeluApproximate);

}  // namespace ember::kernels::cpu
