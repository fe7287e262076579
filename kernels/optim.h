// Fused optimizer updates, one launch per parameter tensor (PyTorch's update rules).
#pragma once

#include <cstdint>

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
