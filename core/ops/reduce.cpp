// Reductions: sum/mean, sum over rows (bias gradients), argmax, correct-prediction counts.
#include <limits>

#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "kernels/reduce.h"

namespace ember::ops {

namespace k = kernels;

namespace {

Tensor scaled_sum(const char* op, const Tensor& x, bool mean) {
  check_defined(op, {"input", x});
  check_floating(op, {"input", x});
  Tensor out = Tensor::empty({}, x.dtype(), x.device());
  if (x.device().is_meta()) return out;
  Tensor xc = x.contiguous();
  const int64_t n = x.numel();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    T scale = mean ? (n > 0 ? T(1) / T(n) : std::numeric_limits<T>::quiet_NaN()) : T(1);  // the mean of nothing is NaN, as in PyTorch
    if (x.device().is_cpu()) {
      k::cpu::sum<T>(xc.data<T>(), n, scale, out.data<T>());
    } else {
#if EMBER_HAS_CUDA
      Tensor workspace = Tensor::empty({static_cast<int64_t>(k::cuda::sum_workspace_elems(n))}, x.dtype(), x.device());
      k::cuda::sum<T>(xc.data<T>(), n, scale, out.data<T>(), workspace.data<T>(), detail::stream_of(x.device()));
#endif
    }
  });
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) { return scaled_sum("sum", x, false); }
Tensor mean(const Tensor& x) { return scaled_sum("mean", x, true); }

void sum_rows_(Tensor& out, const Tensor& x, double beta) {
  check_defined("sum_rows_", {"out", out});
  check_defined("sum_rows_", {"input", x});
  check_same_device("sum_rows_", {{"out", out}, {"input", x}});
  check_same_dtype("sum_rows_", {{"out", out}, {"input", x}});
  check_floating("sum_rows_", {"input", x});
  check_dim("sum_rows_", {"input", x}, 2);
  EMBER_CHECK(out.shape() == Shape{x.size(1)}, ShapeError, "sum_rows_() expects out of shape [", x.size(1),
              "] for input ", shape_str(x.shape()), ", but got ", shape_str(out.shape()));
  EMBER_CHECK(out.is_contiguous(), ValueError, "sum_rows_(): out must be contiguous to be written in place");
  if (x.device().is_meta()) return;
  Tensor xc = x.contiguous();
  visit_floating(x.dtype(), "sum_rows_", [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cpu()) k::cpu::sum_rows<T>(xc.data<T>(), x.size(0), x.size(1), T(beta), out.data<T>());
    else EMBER_CUDA_CALL(k::cuda::sum_rows<T>(xc.data<T>(), x.size(0), x.size(1), T(beta), out.data<T>(), detail::stream_of(x.device())));
  });
}

Tensor sum_rows(const Tensor& x) {
  check_defined("sum_rows", {"input", x});
  check_dim("sum_rows", {"input", x}, 2);
  Tensor out = Tensor::empty({x.size(1)}, x.dtype(), x.device());
  sum_rows_(out, x, 0);
  return out;
}

Tensor argmax(const Tensor& x) {
  check_defined("argmax", {"input", x});
  check_floating("argmax", {"input", x});
  check_dim("argmax", {"input", x}, 2);
  EMBER_CHECK(x.size(1) > 0, ShapeError, "argmax() of rows with no elements (input ", shape_str(x.shape()), ")");
  Tensor out = Tensor::empty({x.size(0)}, DType::I64, x.device());
  if (x.device().is_meta()) return out;
  Tensor xc = x.contiguous();
  visit_floating(x.dtype(), "argmax", [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cpu()) k::cpu::argmax_rows<T>(xc.data<T>(), x.size(0), x.size(1), out.data<int64_t>());
    else EMBER_CUDA_CALL(k::cuda::argmax_rows<T>(xc.data<T>(), x.size(0), x.size(1), out.data<int64_t>(), detail::stream_of(x.device())));
  });
  return out;
}

Tensor count_correct(const Tensor& logits, const Tensor& labels) {
  check_defined("count_correct", {"logits", logits});
  check_defined("count_correct", {"labels", labels});
  check_same_device("count_correct", {{"logits", logits}, {"labels", labels}});
  check_floating("count_correct", {"logits", logits});
  check_label_dtype("count_correct", {"labels", labels});
  check_dim("count_correct", {"logits", logits}, 2);
  check_dim("count_correct", {"labels", labels}, 1);
  EMBER_CHECK(labels.size(0) == logits.size(0), ShapeError, "count_correct() expects one label per row: logits ",
              shape_str(logits.shape()), " but labels ", shape_str(labels.shape()));
  Tensor out = Tensor::empty({}, DType::I64, logits.device());
  if (logits.device().is_meta()) return out;
  Tensor lc = logits.contiguous(), yc = labels.contiguous();
  visit_floating(logits.dtype(), "count_correct", [&](auto zero) {
    using T = decltype(zero);
    auto run = [&](auto* y) {
      if (logits.device().is_cpu())
        k::cpu::count_correct(lc.data<T>(), y, logits.size(0), logits.size(1), out.data<int64_t>());
      else
        EMBER_CUDA_CALL(k::cuda::count_correct(lc.data<T>(), y, logits.size(0), logits.size(1), out.data<int64_t>(),
                                               detail::stream_of(logits.device())));
    };
    if (labels.dtype() == DType::I64) run(yc.data<int64_t>());
    else run(yc.data<int32_t>());
  });
  return out;
}

}  // namespace ember::ops
