// Fused optimizer updates, one launch per parameter tensor (PyTorch's update rules). Each takes an
// optional non-finite guard (kernels/guard.h): when its check flagged the step, the update is skipped.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/error.h"
#include "kernels/common.h"
#include "kernels/guard.h"

namespace ember::kernels {

template <typename T>
struct SgdParams {
  T lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // the momentum buffer starts as the gradient itself (no dampening)
};

template <typename T>
struct AdamWParams {
  T lr, beta1, beta2, eps, weight_decay;
  int64_t step;  // 1-based, for the bias corrections; with a guard, its skipped steps are subtracted
};

// The per-update scalars of AdamW, derived in double (as torch derives them in Python) from the step.
template <typename T>
struct AdamWScalars {
  T decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bias_correction2_sqrt, eps;
};

template <typename T>
EMBER_HOST_DEVICE inline AdamWScalars<T> adamw_scalars(const AdamWParams<T>& p, int64_t step) {
  const double lr = p.lr, beta1 = p.beta1, beta2 = p.beta2, t = static_cast<double>(step);
  return {static_cast<T>(1.0 - lr * static_cast<double>(p.weight_decay)),
          p.beta1,
          static_cast<T>(1.0 - beta1),
          p.beta2,
          static_cast<T>(1.0 - beta2),
          static_cast<T>(lr / (1.0 - ::pow(beta1, t))),
          static_cast<T>(::sqrt(1.0 - ::pow(beta2, t))),
          p.eps};
}

// The step AdamW's bias corrections use: the optimizer's count minus the steps the guard skipped.
EMBER_HOST_DEVICE inline int64_t adamw_applied_step(int64_t step, const GuardState* guard) {
  const int64_t t = guard != nullptr ? step - guard->skipped : step;
  return t >= 1 ? t : 1;
}

namespace detail {
// The argument rules both twins share, so they reject exactly the same inputs.
template <typename T>
void check_sgd_args(int64_t n, const T* momentum_buf, const SgdParams<T>& p) {
  EMBER_ASSERT(n >= 0, "sgd_step: negative element count ", n);
  EMBER_CHECK(!p.nesterov || (p.momentum > 0 && p.dampening == 0), ValueError,
              "SGD: Nesterov momentum requires a momentum and zero dampening (got momentum ", p.momentum,
              ", dampening ", p.dampening, "); set momentum > 0 and dampening = 0, or nesterov = false");
  EMBER_ASSERT(n == 0 || p.momentum == 0 || momentum_buf != nullptr, "sgd_step: momentum ", p.momentum,
               " needs a momentum buffer");
}

template <typename T>
void check_adamw_args(int64_t n, const AdamWParams<T>& p) {
  EMBER_ASSERT(n >= 0, "adamw_step: negative element count ", n);
  EMBER_CHECK(p.step >= 1, ValueError, "AdamW: step must be 1-based (got ", p.step,
              "); the bias corrections 1 - beta^step would divide by zero. Count steps from 1");
}
}  // namespace detail

// `guard` (may be null) is read where the update runs: on CUDA it is device memory, so deciding to skip
// costs the host nothing.
namespace cpu {
// g = grad + wd * p; if momentum: buf = momentum * buf + (1 - dampening) * g (buf = g on the first step),
// g = nesterov ? g + momentum * buf : buf; p -= lr * g. momentum_buf may be null when momentum == 0.
template <typename T>
void sgd_step(T* param, const T* grad, T* momentum_buf, int64_t n, SgdParams<T> p, const GuardState* guard = nullptr);
// p -= lr * wd * p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
template <typename T>
void adamw_step(T* param, const T* grad, T* m, T* v, int64_t n, AdamWParams<T> p, const GuardState* guard = nullptr);
}  // namespace cpu

namespace cuda {
template <typename T>
void sgd_step(T* param, const T* grad, T* momentum_buf, int64_t n, SgdParams<T> p, Stream stream,
              const GuardState* guard = nullptr);
template <typename T>
void adamw_step(T* param, const T* grad, T* m, T* v, int64_t n, AdamWParams<T> p, Stream stream,
                const GuardState* guard = nullptr);
}  // namespace cuda

}  // namespace ember::kernels
