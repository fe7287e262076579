// layer_norm and its backward: devices, dtypes, shapes (in that order), then one dispatch to the host or CUDA
// kernels; the rows are every index but the last.
#include <cmath>
#include <vector>

#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops/layernorm.h"
#include "kernels/layernorm.h"

namespace ember::ops {

namespace k = kernels;

namespace {

// The defined tensors among `args`, in order.
std::vector<NamedTensor> defined(std::initializer_list<NamedTensor> args) {
  std::vector<NamedTensor> out;
  for (const NamedTensor& a : args)
    if (a.tensor.defined()) out.push_back(a);
  return out;
}

// Device, then dtype, of every defined argument against the first.
void check_devices_dtypes(const char* op, std::initializer_list<NamedTensor> args) {
  const std::vector<NamedTensor> all = defined(args);
  for (size_t i = 1; i < all.size(); ++i) check_same_device(op, {all[0], all[i]});
  check_floating(op, all[0]);
  for (size_t i = 1; i < all.size(); ++i) check_same_dtype(op, {all[0], all[i]});
}

// x (..., C) with C > 0: the number of columns.
int64_t columns(const char* op, const Tensor& x) {
  EMBER_CHECK(x.dim() >= 1 && x.size(-1) > 0, ShapeError, op,
              "() normalises over the last dim and needs input (..., C) with C > 0, but got shape ",
              shape_str(x.shape()));
  return x.size(-1);
}

void check_vector(const char* op, NamedTensor t, const Tensor& x) {
  if (!t.tensor.defined()) return;
  EMBER_CHECK(t.tensor.shape() == Shape{x.size(-1)} && t.tensor.is_contiguous(), ShapeError, op,
              "() expects a contiguous ", t.name, " of shape [", x.size(-1), "] for input ", shape_str(x.shape()),
              ", but got ", shape_str(t.tensor.shape()));
}

Shape row_shape(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }

void check_row_stat(const char* op, NamedTensor t, const Tensor& x) {
  EMBER_CHECK(t.tensor.shape() == row_shape(x), ShapeError, op, "() expects ", t.name, " of shape ",
              shape_str(row_shape(x)), " (one per row of input ", shape_str(x.shape()), "), but got ",
              shape_str(t.tensor.shape()));
}

template <typename T> const T* ptr(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

}  // namespace

LayerNormResult layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "layer_norm";
  check_defined(op, {"input", x});
  check_devices_dtypes(op, {{"input", x}, {"weight", weight}, {"bias", bias}});
  const int64_t cols = columns(op, x);
  check_vector(op, {"weight", weight}, x);
  check_vector(op, {"bias", bias}, x);
  EMBER_CHECK(eps >= 0, ValueError, op, "(): eps must be >= 0 (PyTorch's default is 1e-5), got ", eps);
  LayerNormResult r{Tensor::empty(x.shape(), x.dtype(), x.device()), Tensor::empty(row_shape(x), x.dtype(), x.device()),
                    Tensor::empty(row_shape(x), x.dtype(), x.device())};
  if (x.device().is_meta()) return r;
  Tensor xc = x.contiguous();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const k::LayerNormForwardArgs<T> a{xc.data<T>(),   ptr<T>(weight),    ptr<T>(bias),  r.output.data<T>(),
                                       r.mean.data<T>(), r.rstd.data<T>(), x.numel() / cols, cols, T(eps)};
    if (x.device().is_cpu()) k::cpu::layernorm_forward<T>(a);
    else EMBER_CUDA_CALL(k::cuda::layernorm_forward<T>(a, detail::stream_of(x.device())));
  });
  return r;
}

Tensor layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const LayerNormResult& saved,
                           Tensor& grad_weight, Tensor& grad_bias) {
  const char* op = "layer_norm_backward";
  check_defined(op, {"grad_output", grad_out});
  check_defined(op, {"input", x});
  check_defined(op, {"mean", saved.mean});
  check_defined(op, {"rstd", saved.rstd});
  check_devices_dtypes(op, {{"input", x}, {"grad_output", grad_out}, {"weight", weight}, {"mean", saved.mean},
                            {"rstd", saved.rstd}, {"grad_weight", grad_weight}, {"grad_bias", grad_bias}});
  const int64_t cols = columns(op, x);
  check_same_shape(op, {"grad_output", grad_out}, {"input", x});
  check_vector(op, {"weight", weight}, x);
  check_vector(op, {"grad_weight", grad_weight}, x);
  check_vector(op, {"grad_bias", grad_bias}, x);
  check_row_stat(op, {"mean", saved.mean}, x);
  check_row_stat(op, {"rstd", saved.rstd}, x);
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_meta()) return dx;
  Tensor xc = x.contiguous(), dyc = grad_out.contiguous(), mc = saved.mean.contiguous(), rc = saved.rstd.contiguous();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const k::LayerNormBackwardArgs<T> a{xc.data<T>(), dyc.data<T>(),         ptr<T>(weight),
                                        mc.data<T>(), rc.data<T>(),          dx.data<T>(),
                                        grad_weight.defined() ? grad_weight.data<T>() : nullptr,
                                        grad_bias.defined() ? grad_bias.data<T>() : nullptr,
                                        x.numel() / cols, cols};
    if (x.device().is_cpu()) k::cpu::layernorm_backward<T>(a);
    else EMBER_CUDA_CALL(k::cuda::layernorm_backward<T>(a, detail::stream_of(x.device())));
  });
  return dx;
}

}  // namespace ember::ops
