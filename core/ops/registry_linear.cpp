// Registry rows of the GEMM family (kernels/linear.h: matmul, linear, their backward, the cuBLAS backend) and of
// the reductions (kernels/reduce.h). Inputs are multiples of 1/64, so GEMMs with K <= 129 and the sums are exact.
#include <algorithm>
#include <cmath>

#include "core/ops/registry_cases.h"

namespace ember::ops::registry {

namespace {

// C (M, N) of about `size` elements from a reduction of length K: M odd, K about M / 2 but at most 129 (past two
// 64-wide tiles), so a GEMM case costs O(size) and its sums stay exact.
struct GemmSize {
  int64_t M, N, K;
};
GemmSize gemm_size(int64_t size) {
  const int64_t M = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(size)))) | 1;
  return {M, std::max<int64_t>(size / M, 1), std::min<int64_t>(M / 2 + 1, 129)};
}

OpCase gemm_case(const GemmSize& g, double tol) {
  OpCase c;
  c.elements = g.M * g.N;
  c.label = std::to_string(g.M) + "x" + std::to_string(g.N) + "x" + std::to_string(g.K);
  c.tolerance = tol;
  return c;
}

// The sums are exact here, and a wrong element is off by at least 1/4096: the margin (at most 129 x 1e-6 against
// max |C| <= 129) is under that, for a kernel that would round differently.
double gemm_tolerance(DType dtype) { return tolerance(dtype, 1e-6, 1e-14); }

OpCase make_matmul(int64_t n, DType dtype) {
  const GemmSize g = gemm_size(n);
  OpCase c = gemm_case(g, gemm_tolerance(dtype));
  c.inputs = {grid_values({g.M, g.K}, 21, dtype), grid_values({g.K, g.N}, 22, dtype)};
  c.run = [](Device, Args& a) { return Outputs{ops::matmul(a[0], a[1])}; };
  return c;
}

// out = 0.5 a^T b + out: A stored (K, M), accumulated into.
OpCase make_matmul_(int64_t n, DType dtype) {
  const GemmSize g = gemm_size(n);
  OpCase c = gemm_case(g, gemm_tolerance(dtype));
  c.inputs = {grid_values({g.K, g.M}, 23, dtype), grid_values({g.K, g.N}, 24, dtype),
              grid_values({g.M, g.N}, 25, dtype)};
  c.run = [](Device, Args& a) {
    ops::matmul_(a[2], a[0], a[1], true, false, 0.5, 1);
    return Outputs{a[2]};
  };
  return c;
}

// a @ b^T with the cuBLAS backend selected (the CPU has one backend).
OpCase make_matmul_cublas(int64_t n, DType dtype) {
  const GemmSize g = gemm_size(n);
  OpCase c = gemm_case(g, gemm_tolerance(dtype));
  c.inputs = {grid_values({g.M, g.K}, 26, dtype), grid_values({g.N, g.K}, 27, dtype)};
  c.run = [](Device, Args& a) {
    BackendScope cublas(GemmBackend::Cublas);
    return Outputs{ops::matmul(a[0], a[1], false, true)};
  };
  return c;
}

// y = x W^T + b [, ReLU]: x (B, in) = (M, K), W (out, in) = (N, K).
template <bool kRelu>
OpCase make_linear(int64_t n, DType dtype) {
  const GemmSize g = gemm_size(n);
  OpCase c = gemm_case(g, gemm_tolerance(dtype));
  c.inputs = {grid_values({g.M, g.K}, 28, dtype), grid_values({g.N, g.K}, 29, dtype), grid_values({g.N}, 30, dtype)};
  c.run = [](Device, Args& a) { return Outputs{ops::linear(a[0], a[1], a[2], kRelu)}; };
  return c;
}

// grad_weight += dy^T x and dx = dy W: dy (B, out) = (M, N), x (M, K), W (N, K).
OpCase make_linear_backward(int64_t n, DType dtype) {
  const GemmSize g = gemm_size(n);
  OpCase c = gemm_case(g, gemm_tolerance(dtype));
  c.inputs = {grid_values({g.M, g.N}, 31, dtype), grid_values({g.M, g.K}, 32, dtype),
              grid_values({g.N, g.K}, 33, dtype), grid_values({g.N, g.K}, 34, dtype)};
  c.run = [](Device, Args& a) {
    Tensor dx = ops::linear_backward(a[0], a[1], a[2], a[3], true);
    return Outputs{dx, a[3]};
  };
  return c;
}

constexpr int64_t kRowsWidth = 257;  // sum_rows: the bias gradient of a 256-wide layer, plus a column tail
constexpr int64_t kClasses = 10;     // argmax and count_correct: the MLP's logits

template <bool kMean>
OpCase make_sum(int64_t n, DType dtype) {
  OpCase c = case_for({n});
  c.inputs = {grid_values({n}, 35, dtype)};
  c.run = [](Device, Args& a) { return Outputs{kMean ? ops::mean(a[0]) : ops::sum(a[0])}; };
  c.tolerance = kMean ? tolerance(dtype, 1e-6, 1e-14) : 0;  // CUDA scales each block's partial sum by 1/n
  return c;
}

OpCase make_sum_rows(int64_t n, DType dtype) {
  const Matrix m = matrix(n, kRowsWidth);
  OpCase c = case_for({m.rows, m.cols});
  c.inputs = {grid_values({m.rows, m.cols}, 36, dtype)};
  c.run = [](Device, Args& a) { return Outputs{ops::sum_rows(a[0])}; };
  return c;
}

// out = out + sum over rows (beta = 1: bias gradients accumulate).
OpCase make_sum_rows_(int64_t n, DType dtype) {
  const Matrix m = matrix(n, kRowsWidth);
  OpCase c = case_for({m.rows, m.cols});
  c.inputs = {grid_values({m.rows, m.cols}, 37, dtype), grid_values({m.cols}, 38, dtype)};
  c.run = [](Device, Args& a) {
    ops::sum_rows_(a[1], a[0], 1);
    return Outputs{a[1]};
  };
  return c;
}

// Values on a 1/64 grid in [-1, 1): rows with ties, where the first largest must win on both sides.
OpCase make_argmax(int64_t n, DType dtype) {
  const Matrix m = matrix(n, kRowsWidth);
  OpCase c = case_for({m.rows, m.cols});
  c.inputs = {grid_values({m.rows, m.cols}, 39, dtype)};
  c.run = [](Device, Args& a) { return Outputs{ops::argmax(a[0])}; };
  return c;
}

OpCase make_count_correct(int64_t n, DType dtype) {
  const Matrix m = matrix(n, kClasses);
  OpCase c = case_for({m.rows, m.cols});
  c.inputs = {grid_values({m.rows, m.cols}, 40, dtype), class_labels(m.rows, m.cols, label_dtype(dtype))};
  c.run = [](Device, Args& a) { return Outputs{ops::count_correct(a[0], a[1])}; };
  return c;
}

}  // namespace

std::vector<OpRow> linear_rows() {
  const char* fam = "linear";
  return {
      {"matmul", "ops::matmul", fam, "cpu::gemm", "cuda::gemm", kFloating, make_matmul},
      {"matmul_", "ops::matmul_", fam, "cpu::gemm", "cuda::gemm", kFloating, make_matmul_},
      {"matmul_cublas", "ops::matmul", fam, "cpu::gemm", "cuda::gemm_cublas", kFloating, make_matmul_cublas},
      {"linear", "ops::linear", fam, "cpu::gemm", "cuda::gemm", kFloating, make_linear<false>},
      {"linear_relu", "ops::linear", fam, "cpu::gemm", "cuda::gemm", kFloating, make_linear<true>},
      {"linear_backward", "ops::linear_backward", fam, "cpu::gemm_group", "cuda::gemm", kFloating,
       make_linear_backward},
  };
}

std::vector<OpRow> reduce_rows() {
  const char* fam = "reduce";
  return {
      {"sum", "ops::sum", fam, "cpu::sum", "cuda::sum", kFloating, make_sum<false>,
       "sum: all elements to one (4 bytes per element)"},
      {"mean", "ops::mean", fam, "cpu::sum", "cuda::sum", kFloating, make_sum<true>},
      {"sum_rows", "ops::sum_rows", fam, "cpu::sum_rows", "cuda::sum_rows", kFloating, make_sum_rows,
       "sum_rows: (rows, 257) -> (257), the bias gradient (4 bytes per element)"},
      {"sum_rows_", "ops::sum_rows_", fam, "cpu::sum_rows", "cuda::sum_rows", kFloating, make_sum_rows_},
      {"argmax", "ops::argmax", fam, "cpu::argmax_rows", "cuda::argmax_rows", kFloating, make_argmax},
      {"count_correct", "ops::count_correct", fam, "cpu::count_correct", "cuda::count_correct", kFloating,
       make_count_correct},
  };
}

}  // namespace ember::ops::registry
