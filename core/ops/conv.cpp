// conv2d and its backward ops: checks, then one dispatch to the host (im2col + OpenBLAS) or CUDA kernels.
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "kernels/conv.h"

namespace ember::ops {

namespace k = kernels;

namespace {

std::string params_str(const Conv2dParams& p) {
  return detail::concat("stride (", p.stride_h, ", ", p.stride_w, "), padding (", p.pad_h, ", ", p.pad_w, ")");
}

// The geometry of x (N, C, H, W) against weight (OC, C, KH, KW), every size checked.
k::Conv2dGeometry geometry(const char* op, const Shape& x, const Tensor& weight, const Conv2dParams& p) {
  EMBER_CHECK(x.size() == 4, ShapeError, op, "() expects a 4-d input (N, C, H, W), but got shape ", shape_str(x));
  check_dim(op, {"weight", weight}, 4);
  EMBER_CHECK(x[1] == weight.size(1), ShapeError, op, "() expects input (N, ", weight.size(1), ", H, W) for weight ",
              shape_str(weight.shape()), " (OC, C, KH, KW), but got input ", shape_str(x));
  EMBER_CHECK(p.stride_h > 0 && p.stride_w > 0 && p.pad_h >= 0 && p.pad_w >= 0, ValueError, op,
              "(): strides must be positive and padding non-negative, got ", params_str(p));
  const k::Conv2dGeometry g{x[0], x[1], x[2], x[3], weight.size(0), weight.size(2), weight.size(3),
                            p.stride_h, p.stride_w, p.pad_h, p.pad_w};
  EMBER_CHECK(g.H + 2 * g.pad_h >= g.KH && g.W + 2 * g.pad_w >= g.KW, ShapeError, op, "(): the ", g.KH, "x", g.KW,
              " kernel does not fit input ", shape_str(x), " with ", params_str(p),
              "; give a larger input or more padding");
  return g;
}

Shape output_shape(const k::Conv2dGeometry& g) { return {g.N, g.OC, g.OH(), g.OW()}; }

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dParams& p) {
  check_defined("conv2d", {"input", x});
  check_defined("conv2d", {"weight", weight});
  if (bias.defined()) {
    check_same_device("conv2d", {{"input", x}, {"weight", weight}, {"bias", bias}});
    check_same_dtype("conv2d", {{"input", x}, {"weight", weight}, {"bias", bias}});
  } else {
    check_same_device("conv2d", {{"input", x}, {"weight", weight}});
    check_same_dtype("conv2d", {{"input", x}, {"weight", weight}});
  }
  check_floating("conv2d", {"input", x});
  const k::Conv2dGeometry g = geometry("conv2d", x.shape(), weight, p);
  EMBER_CHECK(!bias.defined() || bias.shape() == Shape{g.OC}, ShapeError, "conv2d() expects bias of shape [", g.OC,
              "], but got ", shape_str(bias.shape()));
  Tensor y = Tensor::empty(output_shape(g), x.dtype(), x.device());
  if (x.device().is_meta()) return y;
  Tensor xc = x.contiguous(), wc = weight.contiguous(), bc = bias.defined() ? bias.contiguous() : Tensor();
  visit_floating(x.dtype(), "conv2d", [&](auto zero) {
    using T = decltype(zero);
    const T* b = bc.defined() ? bc.data<T>() : nullptr;
    if (x.device().is_cpu()) k::cpu::conv2d_forward<T>(g, xc.data<T>(), wc.data<T>(), b, y.data<T>());
    else EMBER_CUDA_CALL(k::cuda::conv2d_forward<T>(g, xc.data<T>(), wc.data<T>(), b, y.data<T>(), detail::stream_of(x.device())));
  });
  return y;
}

Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, const Shape& input_shape,
                             const Conv2dParams& p) {
  check_defined("conv2d_backward_input", {"grad_output", grad_out});
  check_defined("conv2d_backward_input", {"weight", weight});
  check_same_device("conv2d_backward_input", {{"grad_output", grad_out}, {"weight", weight}});
  check_same_dtype("conv2d_backward_input", {{"grad_output", grad_out}, {"weight", weight}});
  check_floating("conv2d_backward_input", {"weight", weight});
  const k::Conv2dGeometry g = geometry("conv2d_backward_input", input_shape, weight, p);
  EMBER_CHECK(grad_out.shape() == output_shape(g), ShapeError, "conv2d_backward_input() expects grad_output of shape ",
              shape_str(output_shape(g)), " for input ", shape_str(input_shape), ", but got ",
              shape_str(grad_out.shape()));
  Tensor dx = Tensor::empty(input_shape, weight.dtype(), weight.device());
  if (weight.device().is_meta()) return dx;
  Tensor dyc = grad_out.contiguous(), wc = weight.contiguous();
  visit_floating(weight.dtype(), "conv2d_backward_input", [&](auto zero) {
    using T = decltype(zero);
    if (dx.device().is_cpu()) k::cpu::conv2d_backward_input<T>(g, dyc.data<T>(), wc.data<T>(), dx.data<T>());
    else EMBER_CUDA_CALL(k::cuda::conv2d_backward_input<T>(g, dyc.data<T>(), wc.data<T>(), dx.data<T>(), detail::stream_of(dx.device())));
  });
  return dx;
}

namespace {

// conv2d_backward_weight_'s checks, for `op`; returns the geometry.
k::Conv2dGeometry check_weight_gradient(const char* op, const Tensor& grad_weight, const Tensor& grad_bias,
                                        const Tensor& x, const Tensor& grad_out, const Conv2dParams& p) {
  check_defined(op, {"grad_weight", grad_weight});
  check_defined(op, {"input", x});
  check_defined(op, {"grad_output", grad_out});
  check_same_device(op, {{"grad_weight", grad_weight}, {"input", x}, {"grad_output", grad_out}});
  check_same_dtype(op, {{"grad_weight", grad_weight}, {"input", x}, {"grad_output", grad_out}});
  check_floating(op, {"input", x});
  const k::Conv2dGeometry g = geometry(op, x.shape(), grad_weight, p);
  EMBER_CHECK(grad_out.shape() == output_shape(g), ShapeError, op, "() expects grad_output of shape ",
              shape_str(output_shape(g)), ", but got ", shape_str(grad_out.shape()));
  EMBER_CHECK(grad_weight.is_contiguous(), ValueError, op, "(): grad_weight must be contiguous to accumulate in place");
  if (grad_bias.defined()) {
    check_same_device(op, {{"grad_weight", grad_weight}, {"grad_bias", grad_bias}});
    check_same_dtype(op, {{"grad_weight", grad_weight}, {"grad_bias", grad_bias}});
    EMBER_CHECK(grad_bias.shape() == Shape{g.OC} && grad_bias.is_contiguous(), ShapeError, op,
                "() expects a contiguous grad_bias of shape [", g.OC, "], but got ", shape_str(grad_bias.shape()));
  }
  return g;
}

}  // namespace

void conv2d_backward_weight_(Tensor& grad_weight, Tensor& grad_bias, const Tensor& x, const Tensor& grad_out,
                             const Conv2dParams& p) {
  const char* op = "conv2d_backward_weight_";
  const k::Conv2dGeometry g = check_weight_gradient(op, grad_weight, grad_bias, x, grad_out, p);
  if (x.device().is_meta()) return;
  Tensor xc = x.contiguous(), dyc = grad_out.contiguous();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    T* db = grad_bias.defined() ? grad_bias.data<T>() : nullptr;
    if (x.device().is_cpu()) {
      k::cpu::conv2d_backward_weight<T>(g, xc.data<T>(), dyc.data<T>(), grad_weight.data<T>(), db);
    } else {
#if EMBER_HAS_CUDA
      Tensor workspace = Tensor::empty({static_cast<int64_t>(k::cuda::conv2d_backward_weight_workspace_elems(g))},
                                       x.dtype(), x.device());
      k::cuda::conv2d_backward_weight<T>(g, xc.data<T>(), dyc.data<T>(), grad_weight.data<T>(), db, workspace.data<T>(),
                                         detail::stream_of(x.device()));
#endif
    }
  });
}

Tensor conv2d_backward_(Tensor& grad_weight, Tensor& grad_bias, const Tensor& x, const Tensor& grad_out,
                       const Tensor& weight, const Conv2dParams& p) {
  const char* op = "conv2d_backward_";
  check_defined(op, {"weight", weight});
  const k::Conv2dGeometry g = check_weight_gradient(op, grad_weight, grad_bias, x, grad_out, p);
  check_same_device(op, {{"input", x}, {"weight", weight}});
  check_same_dtype(op, {{"input", x}, {"weight", weight}});
  EMBER_CHECK(weight.shape() == grad_weight.shape(), ShapeError, op, "() expects weight of grad_weight's shape ",
              shape_str(grad_weight.shape()), ", but got ", shape_str(weight.shape()));
  if (!x.device().is_cpu()) {  // meta and CUDA: the two ops
    conv2d_backward_weight_(grad_weight, grad_bias, x, grad_out, p);
    return conv2d_backward_input(grad_out, weight, x.shape(), p);
  }
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor xc = x.contiguous(), dyc = grad_out.contiguous(), wc = weight.contiguous();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    k::cpu::conv2d_backward<T>(g, xc.data<T>(), dyc.data<T>(), wc.data<T>(), grad_weight.data<T>(),
                               grad_bias.defined() ? grad_bias.data<T>() : nullptr, dx.data<T>());
  });
  return dx;
}

}  // namespace ember::ops
