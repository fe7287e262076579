// Optimizer updates: checks, then one fused kernel per parameter tensor.
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/guard.h"
#include "core/ops.h"
#include "kernels/optim.h"

namespace ember::ops {

namespace k = kernels;

namespace {

void check_state(const char* op, const Tensor& param, const char* name, const Tensor& state) {
  check_defined(op, {name, state});
  check_same_device(op, {{"param", param}, {name, state}});
  check_same_dtype(op, {{"param", param}, {name, state}});
  check_same_shape(op, {"param", param}, {name, state});
  EMBER_CHECK(state.is_contiguous(), ValueError, op, "(): ", name, " must be contiguous");
}

void check_param_grad(const char* op, const Tensor& param, const Tensor& grad) {
  check_defined(op, {"param", param});
  check_defined(op, {"grad", grad});
  check_same_device(op, {{"param", param}, {"grad", grad}});
  check_same_dtype(op, {{"param", param}, {"grad", grad}});
  check_floating(op, {"param", param});
  check_same_shape(op, {"param", param}, {"grad", grad});
  EMBER_CHECK(param.is_contiguous() && grad.is_contiguous(), ValueError, op,
              "(): param and grad must be contiguous (parameters always are)");
}

// The guard's state as the kernels read it, after checking it lives where the parameter does.
const k::GuardState* guard_state(const char* op, const Tensor& param, const NonFiniteGuard* guard) {
  if (guard == nullptr) return nullptr;
  EMBER_CHECK(guard->device() == param.device(), DeviceMismatchError, op, "(): the non-finite guard is on ",
              guard->device().str(), " but param is on ", param.device().str(),
              "; create the guard on the model's device (NonFiniteGuard(model.device(), ...))");
  return guard->state();
}

}  // namespace

void sgd_step_(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdOptions& o, bool first_step,
               const NonFiniteGuard* guard) {
  check_param_grad("sgd_step_", param, grad);
  const bool use_momentum = o.momentum != 0;
  if (use_momentum) check_state("sgd_step_", param, "momentum_buf", momentum_buf);
  if (param.device().is_meta()) return;
  const k::GuardState* g = guard_state("sgd_step_", param, guard);
  visit_floating(param.dtype(), "sgd_step_", [&](auto zero) {
    using T = decltype(zero);
    k::SgdParams<T> p{T(o.lr), T(o.momentum), T(o.dampening), T(o.weight_decay), o.nesterov, first_step};
    T* buf = use_momentum ? momentum_buf.data<T>() : nullptr;
    if (param.device().is_cpu()) k::cpu::sgd_step<T>(param.data<T>(), grad.data<T>(), buf, param.numel(), p, g);
    else EMBER_CUDA_CALL(k::cuda::sgd_step<T>(param.data<T>(), grad.data<T>(), buf, param.numel(), p, detail::stream_of(param.device()), g));
  });
}

void adamw_step_(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWOptions& o, int64_t step,
                 const NonFiniteGuard* guard) {
  check_param_grad("adamw_step_", param, grad);
  check_state("adamw_step_", param, "exp_avg", m);
  check_state("adamw_step_", param, "exp_avg_sq", v);
  if (param.device().is_meta()) return;
  const k::GuardState* g = guard_state("adamw_step_", param, guard);
  visit_floating(param.dtype(), "adamw_step_", [&](auto zero) {
    using T = decltype(zero);
    k::AdamWParams<T> p{T(o.lr), T(o.beta1), T(o.beta2), T(o.eps), T(o.weight_decay), step};
    if (param.device().is_cpu())
      k::cpu::adamw_step<T>(param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), param.numel(), p, g);
    else
      EMBER_CUDA_CALL(k::cuda::adamw_step<T>(param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), param.numel(), p,
                                             detail::stream_of(param.device()), g));
  });
}

}  // namespace ember::ops
