// batch_norm and its backward: checks, then one dispatch to the host or CUDA kernels.
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops/batchnorm.h"
#include "core/ops/elementwise.h"
#include "core/ops/pool_geometry.h"
#include "kernels/batchnorm.h"

namespace ember::ops {

namespace k = kernels;

namespace {

// (N, C, H*W) of a 4-d input, or (N, C, 1) of a 2-d one (BatchNorm1d-style features).
k::BatchNormGeometry bn_geometry(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 || x.dim() == 2, ShapeError, "batch_norm() expects input (N, C, H, W) or (N, C), but got shape ",
              shape_str(x.shape()));
  return {x.size(0), x.size(1), x.dim() == 4 ? x.size(2) * x.size(3) : 1};
}

void check_channel_vector(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  check_same_device(op, {{"input", x}, {name, t}});
  check_same_dtype(op, {{"input", x}, {name, t}});
  EMBER_CHECK(t.shape() == Shape{x.size(1)} && t.is_contiguous(), ShapeError, op, "() expects a contiguous ", name,
              " of shape [", x.size(1), "] for input ", shape_str(x.shape()), ", but got ", shape_str(t.shape()));
}

template <typename T> const T* ptr(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }
template <typename T> T* mut(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

// The forward's arguments: the input, its parameters and the running statistics.
k::BatchNormGeometry check_forward(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   const BatchNormState& state, bool training, double momentum) {
  check_defined(op, {"input", x});
  check_floating(op, {"input", x});
  const k::BatchNormGeometry g = bn_geometry(x);
  check_channel_vector(op, "weight", weight, x);
  check_channel_vector(op, "bias", bias, x);
  check_channel_vector(op, "running_mean", state.running_mean, x);
  check_channel_vector(op, "running_var", state.running_var, x);
  EMBER_CHECK(state.running_mean.defined() == state.running_var.defined(), ValueError, op,
              "(): give both running_mean and running_var, or neither");
  EMBER_CHECK(training || state.running_mean.defined(), ValueError, op,
              "(): eval mode needs running statistics; without them use training mode");
  if (state.num_batches_tracked.defined()) {
    check_same_device(op, {{"input", x}, {"num_batches_tracked", state.num_batches_tracked}});
    check_dtype(op, {"num_batches_tracked", state.num_batches_tracked}, DType::I64);
    EMBER_CHECK(state.num_batches_tracked.numel() == 1, ShapeError, op, "(): num_batches_tracked must hold one value");
  }
  EMBER_CHECK(momentum >= 0 && momentum <= 1, ValueError, op, "(): momentum must be in [0, 1], got ", momentum);
  return g;
}

// The backward's per-channel arguments.
void check_backward(const char* op, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& invstd,
                    const Tensor& grad_weight, const Tensor& grad_bias) {
  check_channel_vector(op, "weight", weight, x);
  check_channel_vector(op, "grad_weight", grad_weight, x);
  check_channel_vector(op, "grad_bias", grad_bias, x);
  check_channel_vector(op, "mean", mean, x);
  check_channel_vector(op, "invstd", invstd, x);
}

}  // namespace

BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, BatchNormState& state,
                           bool training, double momentum, double eps, bool relu) {
  const char* op = "batch_norm";
  const k::BatchNormGeometry g = check_forward(op, x, weight, bias, state, training, momentum);
  BatchNormResult r{Tensor::empty(x.shape(), x.dtype(), x.device()), Tensor::empty({g.C}, x.dtype(), x.device()),
                    Tensor::empty({g.C}, x.dtype(), x.device())};
  if (x.device().is_meta()) return r;
  if (!training) r.mean = state.running_mean;
  Tensor xc = x.contiguous();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const bool cpu = x.device().is_cpu();
    [[maybe_unused]] const k::Stream stream = cpu ? nullptr : detail::stream_of(x.device());
    if (training) {
      const k::BatchNormTrainArgs<T> a{xc.data<T>(),         ptr<T>(weight),  ptr<T>(bias),
                                       r.output.data<T>(),   r.mean.data<T>(), r.invstd.data<T>(),
                                       mut<T>(state.running_mean), mut<T>(state.running_var),
                                       mut<int64_t>(state.num_batches_tracked), T(momentum), T(eps), relu};
      if (cpu) k::cpu::batch_norm_forward_train<T>(g, a);
      else EMBER_CUDA_CALL(k::cuda::batch_norm_forward_train<T>(g, a, stream));
    } else {
      const T* rm = state.running_mean.data<T>();
      const T* rv = state.running_var.data<T>();
      if (cpu) k::cpu::batch_norm_forward_eval<T>(g, xc.data<T>(), ptr<T>(weight), ptr<T>(bias), rm, rv, T(eps), relu, r.output.data<T>(), r.invstd.data<T>());
      else EMBER_CUDA_CALL(k::cuda::batch_norm_forward_eval<T>(g, xc.data<T>(), ptr<T>(weight), ptr<T>(bias), rm, rv, T(eps), relu, r.output.data<T>(), r.invstd.data<T>(), stream));
    }
  });
  return r;
}

Tensor batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const BatchNormResult& saved,
                           const Tensor& relu_output, bool training, Tensor& grad_weight, Tensor& grad_bias) {
  const char* op = "batch_norm_backward";
  check_grad_output(op, grad_out, x);
  const k::BatchNormGeometry g = bn_geometry(x);
  check_backward(op, x, weight, saved.mean, saved.invstd, grad_weight, grad_bias);
  if (relu_output.defined()) check_same_shape(op, {"relu_output", relu_output}, {"input", x});
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_meta()) return dx;
  Tensor xc = x.contiguous(), dyc = grad_out.contiguous(), yc = relu_output.defined() ? relu_output.contiguous() : Tensor();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const k::BatchNormBackwardArgs<T> a{xc.data<T>(),     dyc.data<T>(),         ptr<T>(weight),
                                        saved.mean.data<T>(), saved.invstd.data<T>(), ptr<T>(yc),
                                        dx.data<T>(),     mut<T>(grad_weight),   mut<T>(grad_bias), training};
    if (x.device().is_cpu()) k::cpu::batch_norm_backward<T>(g, a);
    else EMBER_CUDA_CALL(k::cuda::batch_norm_backward<T>(g, a, detail::stream_of(x.device())));
  });
  return dx;
}

BatchNormPoolResult batch_norm_relu_pool(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                         BatchNormState& state, bool training, double momentum, double eps,
                                         const Pool2dParams& pool) {
  const char* op = "batch_norm_relu_pool";
  EMBER_CHECK(x.defined() && x.dim() == 4, ShapeError, op, "() expects input (N, C, H, W), but got shape ",
              x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const k::Pool2dGeometry p = internal::pool_geometry(op, x.shape(), pool);
  if (!x.device().is_cpu() && !x.device().is_meta()) {  // CUDA: the two ops
    const BatchNormResult norm = batch_norm(x, weight, bias, state, training, momentum, eps, true);
    MaxPool2dResult pooled = max_pool2d(norm.output, pool);
    return {pooled.output, pooled.argmax, norm.mean, norm.invstd};
  }
  check_forward(op, x, weight, bias, state, training, momentum);
  const Shape out{p.N, p.C, p.OH(), p.OW()};
  BatchNormPoolResult r{Tensor::empty(out, x.dtype(), x.device()), Tensor::empty(out, DType::I32, x.device()),
                        Tensor::empty({p.C}, x.dtype(), x.device()), Tensor::empty({p.C}, x.dtype(), x.device())};
  if (x.device().is_meta()) return r;
  if (!training) r.mean = state.running_mean;
  Tensor xc = x.contiguous();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (training) {
      const k::BatchNormTrainArgs<T> a{xc.data<T>(),         ptr<T>(weight),  ptr<T>(bias),
                                       r.output.data<T>(),   r.mean.data<T>(), r.invstd.data<T>(),
                                       mut<T>(state.running_mean), mut<T>(state.running_var),
                                       mut<int64_t>(state.num_batches_tracked), T(momentum), T(eps), true};
      k::cpu::batch_norm_relu_pool_forward_train<T>(p, a, r.argmax.data<int32_t>());
    } else {
      k::cpu::batch_norm_relu_pool_forward_eval<T>(p, xc.data<T>(), ptr<T>(weight), ptr<T>(bias),
                                                   state.running_mean.data<T>(), state.running_var.data<T>(), T(eps),
                                                   r.output.data<T>(), r.argmax.data<int32_t>(), r.invstd.data<T>());
    }
  });
  return r;
}

Tensor batch_norm_relu_pool_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                                     const BatchNormPoolResult& saved, const Pool2dParams& pool, bool training,
                                     Tensor& grad_weight, Tensor& grad_bias) {
  const char* op = "batch_norm_relu_pool_backward";
  check_defined(op, {"grad_output", grad_out});
  check_defined(op, {"input", x});
  check_same_device(op, {{"grad_output", grad_out}, {"input", x}, {"output", saved.output}, {"argmax", saved.argmax}});
  check_same_dtype(op, {{"grad_output", grad_out}, {"input", x}, {"output", saved.output}});
  check_floating(op, {"input", x});
  check_dtype(op, {"argmax", saved.argmax}, DType::I32);
  const k::Pool2dGeometry p = internal::pool_geometry(op, x.shape(), pool);
  const Shape out{p.N, p.C, p.OH(), p.OW()};
  for (const NamedTensor& t : {NamedTensor{"grad_output", grad_out}, NamedTensor{"output", saved.output},
                               NamedTensor{"argmax", saved.argmax}})
    EMBER_CHECK(t.tensor.shape() == out, ShapeError, op, "() expects ", t.name, " of the pooled shape ",
                shape_str(out), " for input ", shape_str(x.shape()), ", but got ", shape_str(t.tensor.shape()));
  check_backward(op, x, weight, saved.mean, saved.invstd, grad_weight, grad_bias);
  if (!x.device().is_cpu() && !x.device().is_meta()) {  // CUDA: the ReLU's mask on the pooled gradient, then the two ops
    const Tensor unpooled = max_pool2d_backward(relu_backward(grad_out, saved.output), saved.argmax, x.shape(), pool);
    return batch_norm_backward(unpooled, x, weight, {Tensor(), saved.mean, saved.invstd}, Tensor(), training,
                               grad_weight, grad_bias);
  }
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_meta()) return dx;
  Tensor xc = x.contiguous(), dyc = grad_out.contiguous(), yc = saved.output.contiguous(), ic = saved.argmax.contiguous();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const k::BatchNormBackwardArgs<T> a{xc.data<T>(),     dyc.data<T>(),         ptr<T>(weight),
                                        saved.mean.data<T>(), saved.invstd.data<T>(), yc.data<T>(),
                                        dx.data<T>(),     mut<T>(grad_weight),   mut<T>(grad_bias), training};
    k::cpu::batch_norm_relu_pool_backward<T>(p, a, ic.data<int32_t>());
  });
  return dx;
}

}  // namespace ember::ops
