// Softmax, log-softmax and the fused softmax-cross-entropy loss.
#include <limits>
#include <string>

#include "core/checks.h"
#include "core/deferred.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "kernels/reduce.h"
#include "kernels/softmax_xent.h"

namespace ember::ops {

namespace k = kernels;

namespace {

// softmax / log_softmax share their checks and dispatch; cpu_fn / cuda_fn pick the kernel.
template <typename CpuFn, typename CudaFn>
Tensor rowwise(const char* op, const Tensor& x, CpuFn cpu_fn, [[maybe_unused]] CudaFn cuda_fn) {
  check_defined(op, {"input", x});
  check_floating(op, {"input", x});
  check_dim(op, {"input", x}, 2);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_meta()) return out;
  Tensor xc = x.contiguous();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cpu()) cpu_fn(xc.data<T>(), out.data<T>(), x.size(0), x.size(1));
    else EMBER_CUDA_CALL(cuda_fn(xc.data<T>(), out.data<T>(), x.size(0), x.size(1), detail::stream_of(x.device())));
  });
  return out;
}

template <typename CpuFn, typename CudaFn>
Tensor rowwise_backward(const char* op, const Tensor& y, const Tensor& dy, CpuFn cpu_fn, [[maybe_unused]] CudaFn cuda_fn) {
  check_defined(op, {"output", y});
  check_defined(op, {"grad_output", dy});
  check_same_device(op, {{"output", y}, {"grad_output", dy}});
  check_same_dtype(op, {{"output", y}, {"grad_output", dy}});
  check_floating(op, {"output", y});
  check_dim(op, {"output", y}, 2);
  check_same_shape(op, {"output", y}, {"grad_output", dy});
  Tensor out = Tensor::empty(y.shape(), y.dtype(), y.device());
  if (y.device().is_meta()) return out;
  Tensor yc = y.contiguous(), dyc = dy.contiguous();
  visit_floating(y.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (y.device().is_cpu()) cpu_fn(yc.data<T>(), dyc.data<T>(), out.data<T>(), y.size(0), y.size(1));
    else EMBER_CUDA_CALL(cuda_fn(yc.data<T>(), dyc.data<T>(), out.data<T>(), y.size(0), y.size(1), detail::stream_of(y.device())));
  });
  return out;
}

void check_logits_labels(const char* op, const Tensor& logits, const Tensor& labels) {
  check_defined(op, {"logits", logits});
  check_defined(op, {"labels", labels});
  check_same_device(op, {{"logits", logits}, {"labels", labels}});
  check_floating(op, {"logits", logits});
  check_label_dtype(op, {"labels", labels});
  check_dim(op, {"logits", logits}, 2);
  check_dim(op, {"labels", labels}, 1);
  EMBER_CHECK(labels.size(0) == logits.size(0), ShapeError, op, "() expects one label per row: logits ",
              shape_str(logits.shape()), " (B, C) but labels ", shape_str(labels.shape()));
  EMBER_CHECK(logits.size(1) > 0, ShapeError, op, "() needs at least one class, got logits ", shape_str(logits.shape()));
}

}  // namespace

Tensor softmax(const Tensor& x) {
  return rowwise(
      "softmax", x, [](const auto* in, auto* out, int64_t r, int64_t c) { k::cpu::softmax(in, out, r, c); },
      [](const auto* in, auto* out, int64_t r, int64_t c, k::Stream s) { EMBER_CUDA_CALL(k::cuda::softmax(in, out, r, c, s)); });
}

Tensor log_softmax(const Tensor& x) {
  return rowwise(
      "log_softmax", x, [](const auto* in, auto* out, int64_t r, int64_t c) { k::cpu::log_softmax(in, out, r, c); },
      [](const auto* in, auto* out, int64_t r, int64_t c, k::Stream s) {
        EMBER_CUDA_CALL(k::cuda::log_softmax(in, out, r, c, s));
      });
}

Tensor softmax_backward(const Tensor& y, const Tensor& grad_y) {
  return rowwise_backward(
      "softmax_backward", y, grad_y,
      [](const auto* yy, const auto* dy, auto* dx, int64_t r, int64_t c) { k::cpu::softmax_backward(yy, dy, dx, r, c); },
      [](const auto* yy, const auto* dy, auto* dx, int64_t r, int64_t c, k::Stream s) {
        EMBER_CUDA_CALL(k::cuda::softmax_backward(yy, dy, dx, r, c, s));
      });
}

Tensor log_softmax_backward(const Tensor& y, const Tensor& grad_y) {
  return rowwise_backward(
      "log_softmax_backward", y, grad_y,
      [](const auto* yy, const auto* dy, auto* dx, int64_t r, int64_t c) { k::cpu::log_softmax_backward(yy, dy, dx, r, c); },
      [](const auto* yy, const auto* dy, auto* dx, int64_t r, int64_t c, k::Stream s) {
        EMBER_CUDA_CALL(k::cuda::log_softmax_backward(yy, dy, dx, r, c, s));
      });
}

CrossEntropy cross_entropy(const Tensor& logits, const Tensor& labels) {
  check_logits_labels("cross_entropy", logits, labels);
  const int64_t B = logits.size(0), C = logits.size(1);
  CrossEntropy result{Tensor::empty({}, logits.dtype(), logits.device()),
                      Tensor::empty(logits.shape(), logits.dtype(), logits.device())};
  if (logits.device().is_meta()) return result;
  Tensor lc = logits.contiguous(), yc = labels.contiguous();
  Tensor row_loss = Tensor::empty({B}, logits.dtype(), logits.device());
  visit_floating(logits.dtype(), "cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    T inv_b = B > 0 ? T(1) / T(B) : std::numeric_limits<T>::quiet_NaN();
    auto run = [&](auto* y) {
      if (logits.device().is_cpu()) {
        k::cpu::softmax_xent_forward(lc.data<T>(), y, result.probs.data<T>(), row_loss.data<T>(), B, C);
        k::cpu::sum<T>(row_loss.data<T>(), B, inv_b, result.loss.data<T>());
      } else {
#if EMBER_HAS_CUDA
        auto stream = detail::stream_of(logits.device());
        int64_t* bad_row = detail::error_mailbox(
            logits.device(), detail::concat("cross_entropy(): a label is out of range for ", C,
                                            " classes (valid 0..", C - 1, ")"));
        k::cuda::softmax_xent_forward(lc.data<T>(), y, result.probs.data<T>(), row_loss.data<T>(), B, C, bad_row, stream);
        Tensor workspace = Tensor::empty({static_cast<int64_t>(k::cuda::sum_workspace_elems(B))}, logits.dtype(), logits.device());
        k::cuda::sum<T>(row_loss.data<T>(), B, inv_b, result.loss.data<T>(), workspace.data<T>(), stream);
#endif
      }
    };
    if (labels.dtype() == DType::I64) run(yc.data<int64_t>());
    else run(yc.data<int32_t>());
  });
  return result;
}

Tensor cross_entropy_backward(const Tensor& probs, const Tensor& labels, double grad_loss) {
  check_logits_labels("cross_entropy_backward", probs, labels);
  const int64_t B = probs.size(0), C = probs.size(1);
  Tensor grad = Tensor::empty(probs.shape(), probs.dtype(), probs.device());
  if (probs.device().is_meta()) return grad;
  Tensor pc = probs.contiguous(), yc = labels.contiguous();
  visit_floating(probs.dtype(), "cross_entropy_backward", [&](auto zero) {
    using T = decltype(zero);
    T scale = B > 0 ? T(grad_loss / static_cast<double>(B)) : T(0);
    auto run = [&](auto* y) {
      if (probs.device().is_cpu()) k::cpu::softmax_xent_backward(pc.data<T>(), y, scale, grad.data<T>(), B, C);
      else EMBER_CUDA_CALL(k::cuda::softmax_xent_backward(pc.data<T>(), y, scale, grad.data<T>(), B, C, detail::stream_of(probs.device())));
    };
    if (labels.dtype() == DType::I64) run(yc.data<int64_t>());
    else run(yc.data<int32_t>());
  });
  return grad;
}

}  // namespace ember::ops
