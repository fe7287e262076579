// Fused optimizer updates, one launch per parameter tensor (PyTorch's update rules).
#pragma once

#include <cstdint>

#include "core/error.h"
#include "kernels/common.h"

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
  int64_t step;  // 1-based, for the bias corrections
};

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

namespace cpu {
// g = grad + wd * p; if momentum: buf = momentum * buf + (1 - dampening) * g (buf = g on the first step),
// g = nesterov ? g + momentum * buf : buf; p -= lr * g. momentum_buf may be null when momentum == 0.
template <typename T> void sgd_step(T* param, const T* grad, T* momentum_buf, int64_t n, SgdParams<T> p);
// p -= lr * wd * p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
template <typename T> void adamw_step(T* param, const T* grad, T* m, T* v, int64_t n, AdamWParams<T> p);
}  // namespace cpu

namespace cuda {
template <typename T> void sgd_step(T* param, const T* grad, T* momentum_buf, int64_t n, SgdParams<T> p, Stream stream);
template <typename T> void adamw_step(T* param, const T* grad, T* m, T* v, int64_t n, AdamWParams<T> p, Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
