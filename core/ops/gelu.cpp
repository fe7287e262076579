// gelu and its backward: device, dtype, shape, then the form, then one dispatch to the host or CUDA kernels.
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops/gelu.h"
#include "kernels/gelu.h"

namespace ember::ops {

namespace k = kernels;

namespace {

k::GeluApproximate parse_approximate(const char* op, const std::string& approximate) {
  if (approximate == "none") return k::GeluApproximate::None;
  if (approximate == "tanh") return k::GeluApproximate::Tanh;
  throw ValueError(detail::concat(op, "(): approximate must be \"none\" (the exact erf form) or \"tanh\", got \"",
                                  approximate, "\""));
}

}  // namespace

Tensor gelu(const Tensor& x, const std::string& approximate) {
  const char* op = "gelu";
  check_defined(op, {"input", x});
  check_floating(op, {"input", x});
  const k::GeluApproximate form = parse_approximate(op, approximate);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_meta()) return out;
  Tensor xc = x.contiguous();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cpu()) k::cpu::gelu<T>(xc.data<T>(), out.data<T>(), x.numel(), form);
    else EMBER_CUDA_CALL(k::cuda::gelu<T>(xc.data<T>(), out.data<T>(), x.numel(), form, detail::stream_of(x.device())));
  });
  return out;
}

Tensor gelu_backward(const Tensor& grad_out, const Tensor& x, const std::string& approximate) {
  const char* op = "gelu_backward";
  check_grad_output(op, grad_out, x);
  const k::GeluApproximate form = parse_approximate(op, approximate);
  Tensor grad_in = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_meta()) return grad_in;
  Tensor dyc = grad_out.contiguous(), xc = x.contiguous();
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cpu()) k::cpu::gelu_backward<T>(dyc.data<T>(), xc.data<T>(), grad_in.data<T>(), x.numel(), form);
    else
      EMBER_CUDA_CALL(k::cuda::gelu_backward<T>(dyc.data<T>(), xc.data<T>(), grad_in.data<T>(), x.numel(), form,
                                                detail::stream_of(x.device())));
  });
  return grad_in;
}

}  // namespace ember::ops
