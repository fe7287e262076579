// Optimizer updates in place, one fused kernel per parameter tensor (kernels/optim.h).
#pragma once

#include "core/tensor.h"

namespace ember {
class NonFiniteGuard;  // core/guard.h
}

namespace ember::ops {

struct SgdOptions {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};
struct AdamWOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
};
// With a guard (same device), the update is skipped when the guard's last check flagged its step.
// momentum_buf: same shape as param when momentum != 0 (undefined otherwise); first_step starts it.
void sgd_step_(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdOptions& options, bool first_step,
               const NonFiniteGuard* guard = nullptr);
// step is 1-based (bias corrections); the steps a guard skipped are not counted.
void adamw_step_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWOptions& options,
                 int64_t step, const NonFiniteGuard* guard = nullptr);

}  // namespace ember::ops
