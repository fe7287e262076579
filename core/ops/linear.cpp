// matmul and linear: checks and one dispatch to OpenBLAS, ember's CUDA GEMM or cuBLAS.
#include <atomic>

#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "kernels/linear.h"

namespace ember::ops {

namespace k = kernels;

namespace {

std::atomic<GemmBackend> g_backend{GemmBackend::Ember};

struct GemmShape {
  int64_t M, N, K;
};

// Shapes of op(a) (M, K) and op(b) (K, N), checked.
GemmShape gemm_shape(const char* op, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  check_dim(op, {"a", a}, 2);
  check_dim(op, {"b", b}, 2);
  int64_t M = trans_a ? a.size(1) : a.size(0), Ka = trans_a ? a.size(0) : a.size(1);
  int64_t Kb = trans_b ? b.size(1) : b.size(0), N = trans_b ? b.size(0) : b.size(1);
  EMBER_CHECK(Ka == Kb, ShapeError, op, "(): inner dimensions differ: op(a) is [", M, ", ", Ka, "] and op(b) is [", Kb,
              ", ", N, "] (a ", shape_str(a.shape()), trans_a ? " transposed" : "", ", b ", shape_str(b.shape()),
              trans_b ? " transposed" : "", ")");
  return {M, N, Ka};
}

// The single GEMM dispatch; a and b must be contiguous, out contiguous (M, N).
void gemm(const Tensor& a, const Tensor& b, Tensor& out, bool trans_a, bool trans_b, GemmShape s, double alpha,
          double beta, const Tensor& bias, k::Epilogue epilogue) {
  if (out.device().is_meta()) return;
  visit_floating(out.dtype(), "matmul", [&](auto zero) {
    using T = decltype(zero);
    const T* A = a.data<T>();
    const T* B = b.data<T>();
    const T* bias_ptr = bias.defined() ? bias.data<T>() : nullptr;
    int64_t lda = a.size(1), ldb = b.size(1), ldc = s.N;
    T* C = out.data<T>();
    switch (out.device().type) {
      case DeviceType::CPU:
        k::cpu::gemm<T>(trans_a, trans_b, s.M, s.N, s.K, T(alpha), A, lda, B, ldb, T(beta), C, ldc, bias_ptr, epilogue);
        break;
      case DeviceType::CUDA: {
        [[maybe_unused]] auto stream = detail::stream_of(out.device());
        if (g_backend.load() == GemmBackend::Cublas)
          EMBER_CUDA_CALL(k::cuda::gemm_cublas<T>(trans_a, trans_b, s.M, s.N, s.K, T(alpha), A, lda, B, ldb, T(beta), C,
                                                  ldc, bias_ptr, epilogue, stream));
        else
          EMBER_CUDA_CALL(k::cuda::gemm<T>(trans_a, trans_b, s.M, s.N, s.K, T(alpha), A, lda, B, ldb, T(beta), C, ldc,
                                           bias_ptr, epilogue, stream));
        break;
      }
      case DeviceType::Meta: break;
    }
  });
}

// The CPU's two GEMMs of linear_backward in one region: dW += dy^T x and, when dx is defined, dx = dy W.
void linear_backward_cpu(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dw, Tensor& dx) {
  visit_floating(dw.dtype(), "linear_backward", [&](auto zero) {
    using T = decltype(zero);
    const int64_t batch = dy.size(0), out = dy.size(1), in = x.size(1);
    const k::cpu::GemmCall<T> calls[2] = {
        {true, false, out, in, batch, T(1), dy.data<T>(), out, x.data<T>(), in, T(1), dw.data<T>(), in},
        {false, false, batch, in, out, T(1), dy.data<T>(), out, w.data<T>(), in, T(0),
         dx.defined() ? dx.data<T>() : nullptr, in}};
    k::cpu::gemm_group<T>(calls, dx.defined() ? 2 : 1);
  });
}

}  // namespace

void set_gemm_backend(GemmBackend backend) { g_backend.store(backend); }
GemmBackend gemm_backend() { return g_backend.load(); }

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  check_defined("matmul", {"a", a});
  check_defined("matmul", {"b", b});
  check_same_device("matmul", {{"a", a}, {"b", b}});
  check_same_dtype("matmul", {{"a", a}, {"b", b}});
  check_floating("matmul", {"a", a});
  GemmShape s = gemm_shape("matmul", a, b, trans_a, trans_b);
  Tensor out = Tensor::empty({s.M, s.N}, a.dtype(), a.device());
  gemm(a.contiguous(), b.contiguous(), out, trans_a, trans_b, s, 1, 0, Tensor(), k::Epilogue::None);
  return out;
}

void matmul_(Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, double alpha, double beta) {
  check_defined("matmul_", {"out", out});
  check_defined("matmul_", {"a", a});
  check_defined("matmul_", {"b", b});
  check_same_device("matmul_", {{"out", out}, {"a", a}, {"b", b}});
  check_same_dtype("matmul_", {{"out", out}, {"a", a}, {"b", b}});
  check_floating("matmul_", {"a", a});
  GemmShape s = gemm_shape("matmul_", a, b, trans_a, trans_b);
  EMBER_CHECK(out.shape() == Shape({s.M, s.N}), ShapeError, "matmul_() expects out of shape [", s.M, ", ", s.N,
              "], but got ", shape_str(out.shape()));
  EMBER_CHECK(out.is_contiguous(), ValueError, "matmul_(): out must be contiguous to be written in place");
  gemm(a.contiguous(), b.contiguous(), out, trans_a, trans_b, s, alpha, beta, Tensor(), k::Epilogue::None);
}

Tensor linear_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, Tensor& grad_weight,
                       bool input_grad) {
  const char* op = "linear_backward";
  check_defined(op, {"grad_out", grad_out});
  check_defined(op, {"input", x});
  check_defined(op, {"weight", weight});
  check_defined(op, {"grad_weight", grad_weight});
  const std::initializer_list<NamedTensor> all = {
      {"grad_out", grad_out}, {"input", x}, {"weight", weight}, {"grad_weight", grad_weight}};
  check_same_device(op, all);
  check_same_dtype(op, all);
  check_floating(op, {"grad_out", grad_out});
  const GemmShape dw = gemm_shape(op, grad_out, x, true, false);  // (out, B) @ (B, in)
  const GemmShape dx = gemm_shape(op, grad_out, weight, false, false);  // (B, out) @ (out, in)
  EMBER_CHECK(dx.N == dw.N, ShapeError, "linear_backward() expects weight [", dw.M, ", ", dw.N,
              "] = [out, in] for input ", shape_str(x.shape()), ", but got weight ", shape_str(weight.shape()));
  EMBER_CHECK(grad_weight.shape() == weight.shape(), ShapeError, "linear_backward() expects grad_weight of shape ",
              shape_str(weight.shape()), " like the weight, but got ", shape_str(grad_weight.shape()));
  EMBER_CHECK(grad_weight.is_contiguous(), ValueError,
              "linear_backward(): grad_weight must be contiguous to be accumulated in place");
  Tensor dy = grad_out.contiguous(), xc = x.contiguous(), wc = weight.contiguous();
  Tensor grad_in = input_grad ? Tensor::empty({dx.M, dx.N}, x.dtype(), x.device()) : Tensor();
  if (grad_weight.device().is_cpu()) {
    linear_backward_cpu(dy, xc, wc, grad_weight, grad_in);
  } else {
    gemm(dy, xc, grad_weight, true, false, dw, 1, 1, Tensor(), k::Epilogue::None);
    if (input_grad) gemm(dy, wc, grad_in, false, false, dx, 1, 0, Tensor(), k::Epilogue::None);
  }
  return grad_in;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, bool relu) {
  check_defined("linear", {"input", x});
  check_defined("linear", {"weight", weight});
  if (bias.defined()) {
    check_same_device("linear", {{"input", x}, {"weight", weight}, {"bias", bias}});
    check_same_dtype("linear", {{"input", x}, {"weight", weight}, {"bias", bias}});
  } else {
    check_same_device("linear", {{"input", x}, {"weight", weight}});
    check_same_dtype("linear", {{"input", x}, {"weight", weight}});
  }
  check_floating("linear", {"input", x});
  check_dim("linear", {"input", x}, 2);
  check_dim("linear", {"weight", weight}, 2);
  EMBER_CHECK(x.size(1) == weight.size(1), ShapeError, "linear() expects input with ", weight.size(1),
              " features (weight is ", shape_str(weight.shape()), " = [out, in]), but got input ", shape_str(x.shape()));
  if (bias.defined()) {
    EMBER_CHECK(bias.shape() == Shape{weight.size(0)}, ShapeError, "linear() expects bias of shape [", weight.size(0),
                "], but got ", shape_str(bias.shape()));
  }
  GemmShape s{x.size(0), weight.size(0), x.size(1)};
  Tensor out = Tensor::empty({s.M, s.N}, x.dtype(), x.device());
  k::Epilogue epilogue = !bias.defined() ? k::Epilogue::None : relu ? k::Epilogue::BiasRelu : k::Epilogue::Bias;
  Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
  gemm(x.contiguous(), weight.contiguous(), out, false, true, s, 1, 0, bias_c, epilogue);
  if (relu && !bias.defined()) return ops::relu(out);
  return out;
}

}  // namespace ember::ops
