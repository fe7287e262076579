// max_pool2d and its backward: checks, then one dispatch to the host or CUDA kernels.
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops/pool.h"
#include "core/ops/pool_geometry.h"
#include "kernels/pool.h"

namespace ember::ops {

namespace k = kernels;

namespace internal {

k::Pool2dGeometry pool_geometry(const char* op, const Shape& x, const Pool2dParams& p) {
  EMBER_CHECK(x.size() == 4, ShapeError, op, "() expects a 4-d input (N, C, H, W), but got shape ", shape_str(x));
  EMBER_CHECK(p.kernel_h > 0 && p.kernel_w > 0 && p.stride_h > 0 && p.stride_w > 0, ValueError, op,
              "(): kernel and stride must be positive, got kernel (", p.kernel_h, ", ", p.kernel_w, ") stride (",
              p.stride_h, ", ", p.stride_w, ")");
  EMBER_CHECK(p.pad_h >= 0 && p.pad_w >= 0 && 2 * p.pad_h <= p.kernel_h && 2 * p.pad_w <= p.kernel_w, ValueError, op,
              "(): padding must be between 0 and half the kernel, got padding (", p.pad_h, ", ", p.pad_w,
              ") for kernel (", p.kernel_h, ", ", p.kernel_w, ")");
  const k::Pool2dGeometry g{x[0], x[1], x[2], x[3], p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w};
  EMBER_CHECK(g.H + 2 * g.pad_h >= g.KH && g.W + 2 * g.pad_w >= g.KW, ShapeError, op, "(): the ", g.KH, "x", g.KW,
              " window does not fit input ", shape_str(x), " with padding (", g.pad_h, ", ", g.pad_w, ")");
  return g;
}

}  // namespace internal

using internal::pool_geometry;

MaxPool2dResult max_pool2d(const Tensor& x, const Pool2dParams& p) {
  check_defined("max_pool2d", {"input", x});
  check_floating("max_pool2d", {"input", x});
  const k::Pool2dGeometry g = pool_geometry("max_pool2d", x.shape(), p);
  MaxPool2dResult r{Tensor::empty({g.N, g.C, g.OH(), g.OW()}, x.dtype(), x.device()),
                    Tensor::empty({g.N, g.C, g.OH(), g.OW()}, DType::I32, x.device())};
  if (x.device().is_meta()) return r;
  Tensor xc = x.contiguous();
  visit_floating(x.dtype(), "max_pool2d", [&](auto zero) {
    using T = decltype(zero);
    int32_t* idx = r.argmax.data<int32_t>();
    if (x.device().is_cpu()) k::cpu::max_pool2d_forward<T>(g, xc.data<T>(), r.output.data<T>(), idx);
    else EMBER_CUDA_CALL(k::cuda::max_pool2d_forward<T>(g, xc.data<T>(), r.output.data<T>(), idx, detail::stream_of(x.device())));
  });
  return r;
}

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& argmax, const Shape& input_shape, const Pool2dParams& p) {
  const char* op = "max_pool2d_backward";
  check_defined(op, {"grad_output", grad_out});
  check_defined(op, {"argmax", argmax});
  check_same_device(op, {{"grad_output", grad_out}, {"argmax", argmax}});
  check_floating(op, {"grad_output", grad_out});
  check_dtype(op, {"argmax", argmax}, DType::I32);
  const k::Pool2dGeometry g = pool_geometry(op, input_shape, p);
  const Shape out{g.N, g.C, g.OH(), g.OW()};
  EMBER_CHECK(grad_out.shape() == out && argmax.shape() == out, ShapeError, op, "() expects grad_output and argmax of shape ",
              shape_str(out), ", but got ", shape_str(grad_out.shape()), " and ", shape_str(argmax.shape()));
  Tensor dx = Tensor::empty(input_shape, grad_out.dtype(), grad_out.device());
  if (dx.device().is_meta()) return dx;
  Tensor dyc = grad_out.contiguous(), ic = argmax.contiguous();
  visit_floating(dx.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (dx.device().is_cpu()) k::cpu::max_pool2d_backward<T>(g, dyc.data<T>(), ic.data<int32_t>(), dx.data<T>());
    else EMBER_CUDA_CALL(k::cuda::max_pool2d_backward<T>(g, dyc.data<T>(), ic.data<int32_t>(), dx.data<T>(), detail::stream_of(dx.device())));
  });
  return dx;
}

}  // namespace ember::ops
