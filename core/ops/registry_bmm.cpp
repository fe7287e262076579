// Registry rows of the batched GEMM (kernels/bmm.h): bmm in every layout, bmm_ accumulating, the cuBLAS backend and
// a non-contiguous operand. Inputs are multiples of 1/64 and K <= 129, so every product is exact.
#include <algorithm>
#include <cmath>

#include "core/ops/registry_cases.h"

namespace ember::ops::registry {

namespace {

// `batch` odd matrices C (M, N) of about `size` elements in all, M odd, K about M / 2 but at most 129 (past two
// 64-wide tiles, and small enough that the sums stay exact).
struct BmmSize {
  int64_t batch, M, N, K;
};
BmmSize bmm_size(int64_t size) {
  const int64_t batch = std::clamp<int64_t>(size / 200, 1, 7) | 1;
  const int64_t per_batch = std::max<int64_t>(size / batch, 1);
  const int64_t M = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(per_batch)))) | 1;
  return {batch, M, std::max<int64_t>(per_batch / M, 1), std::min<int64_t>(M / 2 + 1, 129)};
}

OpCase bmm_case(const BmmSize& s, DType dtype) {
  OpCase c;
  c.elements = s.batch * s.M * s.N;
  c.label = std::to_string(s.batch) + "x" + std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
  // Exact sums: a wrong element is off by at least 1/4096, far above this margin.
  c.tolerance = tolerance(dtype, 1e-6, 1e-14);
  return c;
}

// op(a) @ op(b) with a stored (batch, M, K) or (batch, K, M) and b (batch, K, N) or (batch, N, K); kCublas runs
// it under GemmBackend::Cublas (the CPU has one backend).
template <bool kTransA, bool kTransB, bool kCublas = false>
OpCase make_bmm(int64_t n, DType dtype) {
  const BmmSize s = bmm_size(n);
  OpCase c = bmm_case(s, dtype);
  const Shape a = kTransA ? Shape{s.batch, s.K, s.M} : Shape{s.batch, s.M, s.K};
  const Shape b = kTransB ? Shape{s.batch, s.N, s.K} : Shape{s.batch, s.K, s.N};
  c.inputs = {grid_values(a, 81 + kTransA, dtype), grid_values(b, 83 + kTransB, dtype)};
  c.run = [](Device, Args& x) {
    BackendScope backend(kCublas ? GemmBackend::Cublas : gemm_backend());  // or the one selected now
    return Outputs{ops::bmm(x[0], x[1], kTransA, kTransB)};
  };
  return c;
}

// Attention's scores Q K^T with two leading dims (2, batch) and K handed over as a transpose(-1, -2) view of a
// (2, batch, K, N) tensor: a non-contiguous operand.
OpCase make_bmm_view(int64_t n, DType dtype) {
  const BmmSize s = bmm_size(n);
  OpCase c = bmm_case(s, dtype);
  c.elements *= 2;
  c.label = "2x" + c.label;
  c.inputs = {grid_values({2, s.batch, s.M, s.K}, 85, dtype), grid_values({2, s.batch, s.K, s.N}, 86, dtype)};
  c.run = [](Device, Args& x) { return Outputs{ops::bmm(x[0], x[1].transpose(-1, -2), false, true)}; };
  return c;
}

// out = 0.5 a^T b + out (beta = 1: gradients accumulate): a stored (batch, K, M).
OpCase make_bmm_(int64_t n, DType dtype) {
  const BmmSize s = bmm_size(n);
  OpCase c = bmm_case(s, dtype);
  c.inputs = {grid_values({s.batch, s.K, s.M}, 87, dtype), grid_values({s.batch, s.K, s.N}, 88, dtype),
              grid_values({s.batch, s.M, s.N}, 89, dtype)};
  c.run = [](Device, Args& x) {
    ops::bmm_(x[2], x[0], x[1], true, false, 0.5, 1);
    return Outputs{x[2]};
  };
  return c;
}

}  // namespace

std::vector<OpRow> bmm_rows() {
  const char* fam = "bmm";
  return {
      {"bmm", "ops::bmm", fam, "cpu::bmm", "cuda::bmm", kFloating, make_bmm<false, false>,
       "bmm: 1-7 products (M, K) @ (K, N), K <= 129 (GB/s of operands; suite gemm has GEMM GFLOP/s)"},
      {"bmm_nt", "ops::bmm", fam, "cpu::bmm", "cuda::bmm", kFloating, make_bmm<false, true>},
      {"bmm_tn", "ops::bmm", fam, "cpu::bmm", "cuda::bmm", kFloating, make_bmm<true, false>},
      {"bmm_tt", "ops::bmm", fam, "cpu::bmm", "cuda::bmm", kFloating, make_bmm<true, true>},
      {"bmm_view", "ops::bmm", fam, "cpu::bmm", "cuda::bmm", kFloating, make_bmm_view},
      {"bmm_", "ops::bmm_", fam, "cpu::bmm", "cuda::bmm", kFloating, make_bmm_},
      {"bmm_cublas", "ops::bmm", fam, "cpu::bmm", "cuda::bmm_cublas", kFloating, make_bmm<false, true, true>},
  };
}

}  // namespace ember::ops::registry
