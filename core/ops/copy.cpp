// cast and cast_: dtype conversion with a scale, one dispatch to the host or CUDA copy kernels.
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops/copy.h"
#include "kernels/copy.h"

namespace ember::ops {

namespace k = kernels;

Tensor cast(const Tensor& x, DType dtype, double scale) {
  check_defined("cast", {"input", x});
  if (scale == 1) return x.to(dtype);
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  cast_(out, x, scale);
  return out;
}

void cast_(Tensor& out, const Tensor& x, double scale) {
  check_defined("cast_", {"out", out});
  check_defined("cast_", {"input", x});
  check_same_device("cast_", {{"out", out}, {"input", x}});
  EMBER_CHECK(out.numel() == x.numel(), ShapeError, "cast_() expects out with as many elements as input, but got out ",
              shape_str(out.shape()), " and input ", shape_str(x.shape()));
  EMBER_CHECK(out.is_contiguous(), ValueError, "cast_(): out must be contiguous to be written in place");
  if (x.device().is_meta()) return;
  Tensor xc = x.contiguous();
  visit_dtype(x.dtype(), [&](auto src_zero) {
    visit_dtype(out.dtype(), [&](auto dst_zero) {
      using S = decltype(src_zero);
      using D = decltype(dst_zero);
      if (x.device().is_cpu()) k::cpu::cast<S, D>(xc.data<S>(), out.data<D>(), x.numel(), scale);
      else EMBER_CUDA_CALL(k::cuda::cast<S, D>(xc.data<S>(), out.data<D>(), x.numel(), scale, detail::stream_of(x.device())));
    });
  });
}

}  // namespace ember::ops
