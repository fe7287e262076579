// Fused SGD and AdamW updates on the host: one pass per tensor, loops the compiler vectorises.
#include "kernels/optim.h"

#include <cmath>
#include <type_traits>

#include "core/error.h"

namespace ember::kernels::cpu {
namespace {

// Calls f with std::true_type or std::false_type, so a runtime option becomes a compile-time one
// and each loop body is branch-free (a branch inside the loop would block vectorisation).
template <typename F>
void with_flag(bool flag, F&& f) {
  if (flag)
    f(std::true_type{});
  else
    f(std::false_type{});
}

template <typename T, bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_loop(T* __restrict param, const T* __restrict grad, T* __restrict buf, int64_t n, T lr, T momentum,
              T one_minus_dampening, T weight_decay) {
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i];
    if constexpr (kDecay) g = g + weight_decay * param[i];  // torch skips this when wd == 0 (0 * inf)
    if constexpr (kMomentum) {
      // Order of the products follows torch: buf.mul_(momentum).add_(g, alpha=1 - dampening).
      const T b = kFirst ? g : momentum * buf[i] + one_minus_dampening * g;
      buf[i] = b;
      g = kNesterov ? g + momentum * b : b;
    }
    param[i] = param[i] - lr * g;
  }
}

template <typename T>
void adamw_loop(T* __restrict param, const T* __restrict grad, T* __restrict m, T* __restrict v, int64_t n, T decay,
                T beta1, T one_minus_beta1, T beta2, T one_minus_beta2, T step_size, T bias_correction2_sqrt, T eps) {
  // std::sqrt keeps an errno path unless -fno-math-errno; with it this loop vectorises too.
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T mi = beta1 * m[i] + one_minus_beta1 * g;
    const T vi = beta2 * v[i] + one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const T denom = std::sqrt(vi) / bias_correction2_sqrt + eps;
    param[i] = param[i] * decay - step_size * mi / denom;
  }
}

}  // namespace

template <typename T>
void sgd_step(T* param, const T* grad, T* momentum_buf, int64_t n, SgdParams<T> p) {
  detail::check_sgd_args(n, momentum_buf, p);
  if (n == 0) return;  // an empty tensor may come with null pointers
  const bool use_momentum = p.momentum != 0;
  const T one_minus_dampening = T(1) - p.dampening;
  with_flag(p.weight_decay != 0, [&](auto decay) {
    with_flag(use_momentum, [&](auto momentum) {
      with_flag(p.first_step, [&](auto first) {
        with_flag(p.nesterov, [&](auto nesterov) {
          sgd_loop<T, decltype(decay)::value, decltype(momentum)::value, decltype(first)::value,
                   decltype(nesterov)::value>(param, grad, momentum_buf, n, p.lr, p.momentum, one_minus_dampening,
                                              p.weight_decay);
        });
      });
    });
  });
}

template <typename T>
void adamw_step(T* param, const T* grad, T* m, T* v, int64_t n, AdamWParams<T> p) {
  detail::check_adamw_args(n, p);
  if (n == 0) return;
  // Host scalars in double, as torch computes them in Python before the tensor ops see them.
  const double lr = p.lr, beta1 = p.beta1, beta2 = p.beta2, t = static_cast<double>(p.step);
  const T decay = static_cast<T>(1.0 - lr * static_cast<double>(p.weight_decay));
  const T step_size = static_cast<T>(lr / (1.0 - std::pow(beta1, t)));
  const T bias_correction2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(beta2, t)));
  adamw_loop<T>(param, grad, m, v, n, decay, p.beta1, static_cast<T>(1.0 - beta1), p.beta2,
                static_cast<T>(1.0 - beta2), step_size, bias_correction2_sqrt, p.eps);
}

template void sgd_step<float>(float*, const float*, float*, int64_t, SgdParams<float>);
template void sgd_step<double>(double*, const double*, double*, int64_t, SgdParams<double>);
template void adamw_step<float>(float*, const float*, float*, float*, int64_t, AdamWParams<float>);
template void adamw_step<double>(double*, const double*, double*, double*, int64_t, AdamWParams<double>);

}  // namespace ember::kernels::cpu
