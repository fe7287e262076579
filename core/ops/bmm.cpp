// bmm and bmm_: checks and one dispatch to OpenBLAS per batch, ember's batched CUDA GEMM or cuBLAS's.
#include "core/ops/bmm.h"

#include <algorithm>
#include <initializer_list>

#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops/linear.h"
#include "kernels/bmm.h"

namespace ember::ops {

namespace k = kernels;

namespace {

struct BmmShape {
  Shape lead;  // the leading (batch) dims, shared by a, b and the output
  int64_t batch, M, N, K;
};

// Shapes of op(a) (..., M, K) and op(b) (..., K, N), checked.
BmmShape bmm_shape(const char* op, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  for (NamedTensor t : {NamedTensor{"a", a}, NamedTensor{"b", b}})
    EMBER_CHECK(t.tensor.dim() >= 3, ShapeError, op, "() expects ", t.name,
                " with at least 3 dims (..., rows, cols), but got shape ", shape_str(t.tensor.shape()),
                "; for one matrix product use matmul(), or add a batch dim of 1 with view()");
  const Shape lead(a.shape().begin(), a.shape().end() - 2);
  EMBER_CHECK(b.dim() == a.dim() && Shape(b.shape().begin(), b.shape().end() - 2) == lead, ShapeError, op,
              "() expects a and b with the same leading dims (no broadcasting), but got a ", shape_str(a.shape()),
              " and b ", shape_str(b.shape()), "; give both the same batch shape, e.g. reshape to (batch, rows, cols)");
  const int64_t M = a.size(trans_a ? -1 : -2), Ka = a.size(trans_a ? -2 : -1);
  const int64_t Kb = b.size(trans_b ? -1 : -2), N = b.size(trans_b ? -2 : -1);
  EMBER_CHECK(Ka == Kb, ShapeError, op, "(): inner dimensions differ: op(a) is [..., ", M, ", ", Ka,
              "] and op(b) is [..., ", Kb, ", ", N, "] (a ", shape_str(a.shape()), trans_a ? " transposed" : "", ", b ",
              shape_str(b.shape()), trans_b ? " transposed" : "",
              "); fix a shape, or set trans_a/trans_b to multiply by the transpose");
  return {lead, shape_numel(lead), M, N, Ka};
}

// Every argument defined, then one device, then one floating dtype (the project's order; shapes come next).
void check_operands(const char* op, std::initializer_list<NamedTensor> args) {
  for (const NamedTensor& t : args) check_defined(op, t);
  check_same_device(op, args);
  check_same_dtype(op, args);
  check_floating(op, *args.begin());
}

// The single dispatch; a and b contiguous, out contiguous (..., M, N).
void batched_gemm(const Tensor& a, const Tensor& b, Tensor& out, bool trans_a, bool trans_b, const BmmShape& s,
                  double alpha, double beta) {
  if (out.device().is_meta() || out.numel() == 0) return;
  visit_floating(out.dtype(), "bmm", [&](auto zero) {
    using T = decltype(zero);
    const T* A = a.data<T>();
    const T* B = b.data<T>();
    T* C = out.data<T>();
    const int64_t lda = std::max<int64_t>(1, trans_a ? s.M : s.K), ldb = std::max<int64_t>(1, trans_b ? s.K : s.N);
    const int64_t stride_a = s.M * s.K, stride_b = s.K * s.N, stride_c = s.M * s.N;
    switch (out.device().type) {
      case DeviceType::CPU:
        k::cpu::bmm<T>(trans_a, trans_b, s.batch, s.M, s.N, s.K, T(alpha), A, lda, stride_a, B, ldb, stride_b, T(beta),
                       C, s.N, stride_c);
        break;
      case DeviceType::CUDA: {
        [[maybe_unused]] auto stream = detail::stream_of(out.device());
        if (gemm_backend() == GemmBackend::Cublas)
          EMBER_CUDA_CALL(k::cuda::bmm_cublas<T>(trans_a, trans_b, s.batch, s.M, s.N, s.K, T(alpha), A, lda, stride_a,
                                                 B, ldb, stride_b, T(beta), C, s.N, stride_c, stream));
        else
          EMBER_CUDA_CALL(k::cuda::bmm<T>(trans_a, trans_b, s.batch, s.M, s.N, s.K, T(alpha), A, lda, stride_a, B, ldb,
                                          stride_b, T(beta), C, s.N, stride_c, stream));
        break;
      }
      case DeviceType::Meta: break;
    }
  });
}

Shape out_shape(const BmmShape& s) {
  Shape shape = s.lead;
  shape.push_back(s.M);
  shape.push_back(s.N);
  return shape;
}

}  // namespace

Tensor bmm(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  check_operands("bmm", {{"a", a}, {"b", b}});
  const BmmShape s = bmm_shape("bmm", a, b, trans_a, trans_b);
  Tensor out = Tensor::empty(out_shape(s), a.dtype(), a.device());
  batched_gemm(a.contiguous(), b.contiguous(), out, trans_a, trans_b, s, 1, 0);
  return out;
}

void bmm_(Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, double alpha, double beta) {
  check_operands("bmm_", {{"a", a}, {"b", b}, {"out", out}});
  const BmmShape s = bmm_shape("bmm_", a, b, trans_a, trans_b);
  EMBER_CHECK(out.shape() == out_shape(s), ShapeError, "bmm_() expects out of shape ", shape_str(out_shape(s)),
              " for a ", shape_str(a.shape()), " and b ", shape_str(b.shape()), ", but got ",
              shape_str(out.shape()));
  EMBER_CHECK(out.is_contiguous(), ValueError,
              "bmm_(): out must be contiguous to be written in place; give it a tensor from Tensor::empty or clone()");
  batched_gemm(a.contiguous(), b.contiguous(), out, trans_a, trans_b, s, alpha, beta);
}

}  // namespace ember::ops
