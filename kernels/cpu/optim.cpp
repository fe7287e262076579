// Fused SGD and AdamW updates on the host: one pass per tensor, loops the compiler vectorises, in fixed chunks on
// the host thread pool.
#include "kernels/optim.h"

#include <cmath>
#include <type_traits>

#include "base/error.h"
#include "kernels/cpu/parallel.h"

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
void adamw_loop(T* __restrict param, const T* __restrict grad, T* __restrict m, T* __restrict v, int64_t n,
                const AdamWScalars<T> s) {
  // std::sqrt keeps an errno path unless -fno-math-errno; with it this loop vectorises too.
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T mi = s.beta1 * m[i] + s.one_minus_beta1 * g;
    const T vi = s.beta2 * v[i] + s.one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const T denom = std::sqrt(vi) / s.bias_correction2_sqrt + s.eps;
    param[i] = param[i] * s.decay - s.step_size * mi / denom;
  }
}

}  // namespace

template <typename T>
void sgd_step(T* param, const T* grad, T* momentum_buf, int64_t n, SgdParams<T> p, const GuardState* guard) {
  detail::check_sgd_args(n, momentum_buf, p);
  if (n == 0) return;  // an empty tensor may come with null pointers
  if (guard != nullptr && guard->skip != 0) return;
  const bool use_momentum = p.momentum != 0;
  const T one_minus_dampening = T(1) - p.dampening;
  with_flag(p.weight_decay != 0, [&](auto decay) {
    with_flag(use_momentum, [&](auto momentum) {
      with_flag(p.first_step, [&](auto first) {
        with_flag(p.nesterov, [&](auto nesterov) {
          parallel_chunks(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
            sgd_loop<T, decltype(decay)::value, decltype(momentum)::value, decltype(first)::value,
                     decltype(nesterov)::value>(param + begin, grad + begin,
                                                momentum_buf == nullptr ? nullptr : momentum_buf + begin, end - begin,
                                                p.lr, p.momentum, one_minus_dampening, p.weight_decay);
          }, "sgd_step");
        });
      });
    });
  });
}

template <typename T>
void adamw_step(T* param, const T* grad, T* m, T* v, int64_t n, AdamWParams<T> p, const GuardState* guard) {
  detail::check_adamw_args(n, p);
  if (n == 0) return;
  if (guard != nullptr && guard->skip != 0) return;
  const AdamWScalars<T> scalars = adamw_scalars(p, adamw_applied_step(p.step, guard));
  parallel_chunks(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    adamw_loop<T>(param + begin, grad + begin, m + begin, v + begin, end - begin, scalars);
  });
}

template void sgd_step<float>(float*, const float*, float*, int64_t, SgdParams<float>, const GuardState*);
template void sgd_step<double>(double*, const double*, double*, int64_t, SgdParams<double>, const GuardState*);
template void adamw_step<float>(float*, const float*, float*, float*, int64_t, AdamWParams<float>, const GuardState*);
template void adamw_step<double>(double*, const double*, double*, double*, int64_t, AdamWParams<double>,
                                 const GuardState*);

}  // namespace ember::kernels::cpu
