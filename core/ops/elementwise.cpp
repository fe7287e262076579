// Elementwise ops: checks, output allocation, one dispatch to the cpu or cuda kernel.
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops/elementwise.h"
#include "kernels/elementwise.h"

namespace ember::ops {

namespace k = kernels;

namespace {

// The shared body of add/sub/mul: the checks, then cpu_fn or cuda_fn on contiguous inputs.
template <typename CpuFn, typename CudaFn>
Tensor binary(const char* op, const Tensor& a, const Tensor& b, CpuFn cpu_fn, [[maybe_unused]] CudaFn cuda_fn) {
  check_defined(op, {"self", a});
  check_defined(op, {"other", b});
  check_same_device(op, {{"self", a}, {"other", b}});
  check_same_dtype(op, {{"self", a}, {"other", b}});
  check_floating(op, {"self", a});
  check_same_shape(op, {"self", a}, {"other", b});
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (a.device().is_meta()) return out;
  Tensor ac = a.contiguous(), bc = b.contiguous();
  visit_floating(a.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (a.device().is_cpu()) cpu_fn(ac.data<T>(), bc.data<T>(), out.data<T>(), out.numel());
    else EMBER_CUDA_CALL(cuda_fn(ac.data<T>(), bc.data<T>(), out.data<T>(), out.numel(), detail::stream_of(a.device())));
  });
  return out;
}

}  // namespace

#define EMBER_BINARY_OP(name)                                                                                    \
  Tensor name(const Tensor& a, const Tensor& b) {                                                                \
    return binary(                                                                                               \
        #name, a, b, [](const auto* x, const auto* y, auto* z, int64_t n) { k::cpu::name(x, y, z, n); },         \
        [](const auto* x, const auto* y, auto* z, int64_t n, k::Stream s) { EMBER_CUDA_CALL(k::cuda::name(x, y, z, n, s)); }); \
  }
EMBER_BINARY_OP(add)
EMBER_BINARY_OP(sub)
EMBER_BINARY_OP(mul)
#undef EMBER_BINARY_OP

Tensor scale(const Tensor& a, double alpha) {
  check_defined("scale", {"self", a});
  check_floating("scale", {"self", a});
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (a.device().is_meta()) return out;
  Tensor ac = a.contiguous();
  visit_floating(a.dtype(), "scale", [&](auto zero) {
    using T = decltype(zero);
    if (a.device().is_cpu()) k::cpu::scale<T>(ac.data<T>(), T(alpha), out.data<T>(), out.numel());
    else EMBER_CUDA_CALL(k::cuda::scale<T>(ac.data<T>(), T(alpha), out.data<T>(), out.numel(), detail::stream_of(a.device())));
  });
  return out;
}

void add_(Tensor& self, const Tensor& other, double alpha) {
  check_defined("add_", {"self", self});
  check_defined("add_", {"other", other});
  check_same_device("add_", {{"self", self}, {"other", other}});
  check_same_dtype("add_", {{"self", self}, {"other", other}});
  check_floating("add_", {"self", self});
  check_same_shape("add_", {"self", self}, {"other", other});
  EMBER_CHECK(self.is_contiguous(), ValueError, "add_(): self must be contiguous to be updated in place");
  if (self.device().is_meta()) return;
  Tensor oc = other.contiguous();
  visit_floating(self.dtype(), "add_", [&](auto zero) {
    using T = decltype(zero);
    if (self.device().is_cpu()) k::cpu::axpy<T>(T(alpha), oc.data<T>(), self.data<T>(), self.numel());
    else EMBER_CUDA_CALL(k::cuda::axpy<T>(T(alpha), oc.data<T>(), self.data<T>(), self.numel(), detail::stream_of(self.device())));
  });
}

void fill_(Tensor& self, double value) {
  check_defined("fill_", {"self", self});
  EMBER_CHECK(self.is_contiguous(), ValueError, "fill_(): self must be contiguous to be filled in place");
  if (self.device().is_meta()) return;
  visit_dtype(self.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (self.device().is_cpu()) k::cpu::fill<T>(self.data<T>(), self.numel(), static_cast<T>(value));
    else EMBER_CUDA_CALL(k::cuda::fill<T>(self.data<T>(), self.numel(), static_cast<T>(value), detail::stream_of(self.device())));
  });
}

Tensor add_bias(const Tensor& x, const Tensor& bias) {
  check_defined("add_bias", {"input", x});
  check_defined("add_bias", {"bias", bias});
  check_same_device("add_bias", {{"input", x}, {"bias", bias}});
  check_same_dtype("add_bias", {{"input", x}, {"bias", bias}});
  check_floating("add_bias", {"input", x});
  check_dim("add_bias", {"input", x}, 2);
  check_dim("add_bias", {"bias", bias}, 1);
  EMBER_CHECK(bias.size(0) == x.size(1), ShapeError, "add_bias() expects bias of shape [", x.size(1),
              "] to match input's last dim, but got bias ", shape_str(bias.shape()), " and input ", shape_str(x.shape()));
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_meta()) return out;
  Tensor xc = x.contiguous(), bc = bias.contiguous();
  visit_floating(x.dtype(), "add_bias", [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cpu()) k::cpu::add_bias<T>(xc.data<T>(), bc.data<T>(), out.data<T>(), x.size(0), x.size(1));
    else EMBER_CUDA_CALL(k::cuda::add_bias<T>(xc.data<T>(), bc.data<T>(), out.data<T>(), x.size(0), x.size(1), detail::stream_of(x.device())));
  });
  return out;
}

Tensor relu(const Tensor& x) {
  check_defined("relu", {"input", x});
  check_floating("relu", {"input", x});
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_meta()) return out;
  Tensor xc = x.contiguous();
  visit_floating(x.dtype(), "relu", [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cpu()) k::cpu::relu<T>(xc.data<T>(), out.data<T>(), x.numel());
    else EMBER_CUDA_CALL(k::cuda::relu<T>(xc.data<T>(), out.data<T>(), x.numel(), detail::stream_of(x.device())));
  });
  return out;
}

Tensor relu_backward(const Tensor& grad_out, const Tensor& y) {
  return binary(
      "relu_backward", grad_out, y,
      [](const auto* g, const auto* yy, auto* out, int64_t n) { k::cpu::relu_backward(g, yy, out, n); },
      [](const auto* g, const auto* yy, auto* out, int64_t n, k::Stream s) {
        EMBER_CUDA_CALL(k::cuda::relu_backward(g, yy, out, n, s));
      });
}

}  // namespace ember::ops
