// cpu::bmm and ops::bmm / bmm_ against a plain float64 loop: every layout, batch 1 and odd sizes, padded and strided
// batches, non-contiguous views, the same bits at any thread count, and each error message.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/error.h"
#include "core/ops.h"
#include "kernels/bmm.h"
#include "kernels/linear.h"
#include "support/compare.h"
#include "support/data.h"
#include "support/threads.h"

namespace {

using namespace ember;
namespace cpu = ember::kernels::cpu;

struct Problem {
  bool trans_a = false, trans_b = false;
  int64_t batch = 1, M = 1, N = 1, K = 1;
  double alpha = 1, beta = 0;
  int64_t pad = 0;  // extra elements per stored row and after every matrix, in A, B and C
};

// Element (i, j) of the b-th op(X) of a strided batch stored row-major with leading dimension ld.
template <typename T>
double element(const std::vector<T> &x, int64_t b, int64_t stride, int64_t ld, bool trans, int64_t i, int64_t j) {
  return static_cast<double>(x[static_cast<size_t>(b * stride + (trans ? j * ld + i : i * ld + j))]);
}

template <typename T>
struct Layout {
  int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
  std::vector<T> A, B, C;  // C: NaN where it must not be read (beta == 0) or written (padding)
};

template <typename T>
Layout<T> layout(const Problem &p, unsigned seed) {
  Layout<T> l;
  const int64_t a_rows = p.trans_a ? p.K : p.M, b_rows = p.trans_b ? p.N : p.K;
  l.lda = std::max<int64_t>(1, p.trans_a ? p.M : p.K) + p.pad;
  l.ldb = std::max<int64_t>(1, p.trans_b ? p.K : p.N) + p.pad;
  l.ldc = std::max<int64_t>(1, p.N) + p.pad;
  l.stride_a = a_rows * l.lda + p.pad, l.stride_b = b_rows * l.ldb + p.pad, l.stride_c = p.M * l.ldc + p.pad;
  l.A = test::random_values<T>(std::max<int64_t>(1, p.batch * l.stride_a), seed, -1, 1);
  l.B = test::random_values<T>(std::max<int64_t>(1, p.batch * l.stride_b), seed + 1, -1, 1);
  l.C = test::random_values<T>(std::max<int64_t>(1, p.batch * l.stride_c), seed + 2, -1, 1);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (size_t e = 0; e < l.C.size(); ++e) {
    const int64_t in_matrix = static_cast<int64_t>(e) % l.stride_c;
    if (p.beta == 0 || in_matrix >= p.M * l.ldc || in_matrix % l.ldc >= p.N) l.C[e] = nan;
  }
  return l;
}

// The plain loop: every batch, row and column summed in double.
template <typename T>
std::vector<double> expected_of(const Problem &p, const Layout<T> &l) {
  std::vector<double> out(l.C.begin(), l.C.end());
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = 0; j < p.N; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < p.K; ++k)
          sum += element(l.A, b, l.stride_a, l.lda, p.trans_a, i, k) * element(l.B, b, l.stride_b, l.ldb, p.trans_b, k, j);
        double &c = out[static_cast<size_t>(b * l.stride_c + i * l.ldc + j)];
        c = p.alpha * sum + (p.beta == 0 ? 0.0 : p.beta * c);
      }
  return out;
}

template <typename T>
void check_problem(const Problem &p, unsigned seed = 3) {
  Layout<T> l = layout<T>(p, seed);
  const std::vector<double> expected = expected_of(p, l);
  std::vector<T> ref = l.C;
  cpu::bmm<T>(p.trans_a, p.trans_b, p.batch, p.M, p.N, p.K, T(p.alpha), l.A.data(), l.lda, l.stride_a, l.B.data(),
              l.ldb, l.stride_b, T(p.beta), l.C.data(), l.ldc, l.stride_c);
  cpu::bmm_reference<T>(p.trans_a, p.trans_b, p.batch, p.M, p.N, p.K, T(p.alpha), l.A.data(), l.lda, l.stride_a,
                        l.B.data(), l.ldb, l.stride_b, T(p.beta), ref.data(), l.ldc, l.stride_c);
  INFO("trans_a=" << p.trans_a << " trans_b=" << p.trans_b << " batch=" << p.batch << " M=" << p.M << " N=" << p.N
                  << " K=" << p.K << " alpha=" << p.alpha << " beta=" << p.beta << " pad=" << p.pad);
  REQUIRE_CLOSE(l.C, expected, test::gemm_tolerance<T>(p.K));
  REQUIRE_CLOSE(ref, expected, test::gemm_tolerance<T>(p.K));
}

}  // namespace

TEMPLATE_TEST_CASE("cpu bmm matches a float64 loop in every layout, batch 1 and odd sizes", "[kernels]", float,
                   double) {
  const std::vector<std::array<int64_t, 4>> shapes = {{1, 1, 1, 1},  {1, 5, 7, 3},   {3, 1, 1, 9},   {2, 7, 1, 4},
                                                      {5, 17, 13, 9}, {1, 37, 53, 29}, {3, 65, 33, 70}, {9, 4, 5, 6}};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const auto &s : shapes) check_problem<TestType>({ta, tb, s[0], s[1], s[2], s[3]});
}

TEMPLATE_TEST_CASE("cpu bmm: alpha, beta, padded rows and gaps between the batch's matrices", "[kernels]", float,
                   double) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (double beta : {0.0, 1.0, -0.5}) {
        check_problem<TestType>({ta, tb, 4, 19, 23, 11, 1.5, beta, /*pad=*/3});
        check_problem<TestType>({ta, tb, 3, 7, 5, 0, 1, beta, /*pad=*/1});  // K == 0: beta * C
      }
}

TEMPLATE_TEST_CASE("cpu bmm: every batch is cpu::gemm's bits, at 1, 2 and 3 threads", "[kernels]", float, double) {
  using T = TestType;
  // Many small products (attention's scores) and two large ones that gemm would cut into tiles.
  for (const Problem &p : {Problem{false, true, 300, 17, 17, 16}, Problem{true, false, 2, 130, 70, 120},
                           Problem{false, false, 1, 130, 131, 120}, Problem{true, true, 3, 65, 70, 129}}) {
    Layout<T> l = layout<T>({p.trans_a, p.trans_b, p.batch, p.M, p.N, p.K, 1, 1}, 5);
    std::vector<T> each = l.C;
    for (int64_t b = 0; b < p.batch; ++b)
      cpu::gemm<T>(p.trans_a, p.trans_b, p.M, p.N, p.K, T(1), l.A.data() + b * l.stride_a, l.lda,
                   l.B.data() + b * l.stride_b, l.ldb, T(0.5), each.data() + b * l.stride_c, l.ldc, nullptr,
                   kernels::Epilogue::None);
    for (int threads : {1, 2, 3}) {
      test::ThreadsScope scope(threads);
      std::vector<T> C = l.C;
      cpu::bmm<T>(p.trans_a, p.trans_b, p.batch, p.M, p.N, p.K, T(1), l.A.data(), l.lda, l.stride_a, l.B.data(), l.ldb,
                  l.stride_b, T(0.5), C.data(), l.ldc, l.stride_c);
      INFO("batch=" << p.batch << " M=" << p.M << " N=" << p.N << " K=" << p.K << " threads=" << threads);
      CHECK(C == each);
    }
  }
}

TEST_CASE("cpu bmm: stride 0 multiplies every batch by the same matrix", "[kernels]") {
  const std::vector<double> a = {1, 2, 3, 4};                    // one (2, 2) for every batch
  const std::vector<double> b = {1, 0, 0, 1, 0, 1, 1, 0};        // identity, then the swap
  std::vector<double> c(8, std::numeric_limits<double>::quiet_NaN());
  cpu::bmm<double>(false, false, 2, 2, 2, 2, 1, a.data(), 2, 0, b.data(), 2, 4, 0, c.data(), 2, 4);
  REQUIRE_CLOSE(c, (std::vector<double>{1, 2, 3, 4, 2, 1, 4, 3}), test::kExact);
}

TEST_CASE("cpu bmm: an empty batch or output writes nothing, and bad arguments are named", "[kernels]") {
  std::vector<float> A(64, 1), B(64, 1), C(64, 7);
  cpu::bmm<float>(false, false, 0, 4, 4, 4, 1, nullptr, 4, 16, nullptr, 4, 16, 0, nullptr, 4, 16);
  cpu::bmm<float>(false, false, 3, 0, 4, 4, 1, A.data(), 4, 16, B.data(), 4, 16, 0, C.data(), 4, 16);
  REQUIRE_CLOSE(C, std::vector<float>(64, 7), test::kExact);
  auto run = [&](int64_t batch, int64_t stride_a, int64_t stride_c, int64_t lda) {
    cpu::bmm<float>(false, false, batch, 4, 4, 4, 1, A.data(), lda, stride_a, B.data(), 4, 16, 0, C.data(), 4,
                    stride_c);
  };
  REQUIRE_NOTHROW(run(4, 16, 16, 4));
  CHECK_THROWS_WITH(run(-1, 16, 16, 4), Catch::Contains("cpu::bmm: batch must be non-negative, got -1"));
  CHECK_THROWS_WITH(run(2, -16, 16, 4), Catch::Contains("batch strides must be non-negative, got stride_a=-16"));
  CHECK_THROWS_WITH(run(2, 16, 15, 4), Catch::Contains("stride_c=15 is smaller than one output matrix (16 elements") &&
                                           Catch::Contains("would overlap"));
  CHECK_THROWS_WITH(run(2, 16, 16, 3), Catch::Contains("lda=3 is smaller than a stored row of A"));
  CHECK_NOTHROW(run(1, 16, 0, 4));  // one matrix: its stride is never used
}

// ---- ops::bmm / bmm_ ------------------------------------------------------------------------------------------

namespace {

// op(a) @ op(b) over the leading dims of 3-d cpu tensors, in float64 from their (any-strided) values.
std::vector<double> loop_bmm(const Tensor &a, const Tensor &b, bool ta, bool tb) {
  const Tensor ad = a.contiguous().to(DType::F64), bd = b.contiguous().to(DType::F64);
  const int64_t batch = a.size(0), M = a.size(ta ? 2 : 1), K = a.size(ta ? 1 : 2), N = b.size(tb ? 1 : 2);
  const std::vector<double> av = ad.to_vector<double>(), bv = bd.to_vector<double>();
  std::vector<double> out(static_cast<size_t>(batch * M * N));
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < K; ++k)
          sum += element(av, s, M * K, ta ? M : K, ta, i, k) * element(bv, s, K * N, tb ? K : N, tb, k, j);
        out[static_cast<size_t>((s * M + i) * N + j)] = sum;
      }
  return out;
}

std::vector<double> values(const Tensor &t) { return t.to(DType::F64).to_vector<double>(); }

}  // namespace

TEST_CASE("ops::bmm in every layout, on contiguous tensors and on transpose(-1, -2) views", "[kernels]") {
  const int64_t batch = 3, M = 5, N = 7, K = 4;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor a = Tensor::rand(ta ? Shape{batch, K, M} : Shape{batch, M, K}, 1, DType::F32, Device::cpu(), -1, 1);
      const Tensor b = Tensor::rand(tb ? Shape{batch, N, K} : Shape{batch, K, N}, 2, DType::F32, Device::cpu(), -1, 1);
      INFO("trans_a=" << ta << " trans_b=" << tb);
      const Tensor out = ops::bmm(a, b, ta, tb);
      CHECK(out.shape() == Shape({batch, M, N}));
      REQUIRE_CLOSE(values(out), loop_bmm(a, b, ta, tb), test::gemm_f32(K));
      // The same products with each operand handed over as a transposed view and the flag flipped.
      const Tensor at = a.contiguous().transpose(-1, -2).contiguous().transpose(-1, -2);
      REQUIRE_CLOSE(values(ops::bmm(a.transpose(-1, -2), b, !ta, tb)), loop_bmm(a, b, ta, tb), test::gemm_f32(K));
      REQUIRE_CLOSE(values(ops::bmm(at, b.transpose(-1, -2), ta, !tb)), loop_bmm(a, b, ta, tb), test::gemm_f32(K));
    }
}

TEST_CASE("ops::bmm: two leading dims, float64, a sliced batch, and bmm_ accumulating", "[kernels]") {
  const Tensor a = Tensor::rand({2, 3, 6, 5}, 3, DType::F64, Device::cpu(), -1, 1);
  const Tensor b = Tensor::rand({2, 3, 5, 4}, 4, DType::F64, Device::cpu(), -1, 1);
  const Tensor out = ops::bmm(a, b);
  CHECK(out.shape() == Shape({2, 3, 6, 4}));
  REQUIRE_CLOSE(values(out), loop_bmm(a.reshape({6, 6, 5}), b.reshape({6, 5, 4}), false, false), test::kF64);
  // Every other batch of a (6, ...) tensor: a view whose batch stride skips matrices.
  const Tensor wide = Tensor::rand({6, 6, 5}, 5, DType::F64, Device::cpu(), -1, 1).slice(0, 0, 6, 2);
  REQUIRE_CLOSE(values(ops::bmm(wide, b.reshape({6, 5, 4}).slice(0, 0, 3))),
                loop_bmm(wide, b.reshape({6, 5, 4}).slice(0, 0, 3), false, false), test::kF64);
  // out = 0.5 a b + out, twice: 0.5 a b + 0.5 a b + out0.
  Tensor acc = Tensor::rand({2, 3, 6, 4}, 6, DType::F64, Device::cpu(), -1, 1);
  const std::vector<double> start = values(acc), product = values(out);
  ops::bmm_(acc, a, b, false, false, 0.5, 1);
  ops::bmm_(acc, a, b, false, false, 0.5, 1);
  std::vector<double> expected(start.size());
  for (size_t i = 0; i < start.size(); ++i) expected[i] = start[i] + product[i];
  REQUIRE_CLOSE(values(acc), expected, test::kF64);
  ops::bmm_(acc, a, b, false, false, 2, 0);  // beta = 0 overwrites
  for (size_t i = 0; i < start.size(); ++i) expected[i] = 2 * product[i];
  REQUIRE_CLOSE(values(acc), expected, test::kF64);
}

TEST_CASE("ops::bmm: K == 0 gives zeros, an empty batch an empty result, meta tensors only a shape", "[kernels]") {
  const Tensor zeros = ops::bmm(Tensor::ones({2, 3, 0}), Tensor::ones({2, 0, 4}));
  REQUIRE_CLOSE(values(zeros), std::vector<double>(24, 0.0), test::kExact);
  CHECK(ops::bmm(Tensor::ones({0, 3, 2}), Tensor::ones({0, 2, 4})).shape() == Shape({0, 3, 4}));
  const Tensor meta = ops::bmm(Tensor::empty({5, 2, 3, 7}, DType::F32, Device::meta()),
                               Tensor::empty({5, 2, 9, 3}, DType::F32, Device::meta()), true, true);
  CHECK(meta.device().is_meta());
  CHECK(meta.shape() == Shape({5, 2, 7, 9}));
}

TEST_CASE("ops::bmm and bmm_ reject what they cannot multiply, saying how to fix it", "[kernels]") {
  const Tensor a = Tensor::ones({2, 3, 4}), b = Tensor::ones({2, 4, 5});
  const Tensor on_meta = Tensor::empty({2, 4, 5}, DType::F32, Device::meta());
  CHECK_THROWS_AS(ops::bmm(a, on_meta), DeviceMismatchError);
  CHECK_THROWS_WITH(ops::bmm(a, on_meta), Catch::Contains("bmm() got a on cpu and b on meta"));
  CHECK_THROWS_AS(ops::bmm(a, b.to(DType::F64)), DTypeError);
  CHECK_THROWS_AS(ops::bmm(a.to(DType::I32), b.to(DType::I32)), DTypeError);
  CHECK_THROWS_WITH(ops::bmm(Tensor::ones({3, 4}), Tensor::ones({4, 5})),
                    Catch::Contains("bmm() expects a with at least 3 dims (..., rows, cols), but got shape [3, 4]") &&
                        Catch::Contains("use matmul()"));
  CHECK_THROWS_WITH(ops::bmm(a, Tensor::ones({3, 4, 5})),
                    Catch::Contains("the same leading dims (no broadcasting), but got a [2, 3, 4] and b [3, 4, 5]"));
  CHECK_THROWS_WITH(ops::bmm(a, Tensor::ones({1, 2, 4, 5})), Catch::Contains("the same leading dims"));
  CHECK_THROWS_AS(ops::bmm(a, a), ShapeError);
  CHECK_THROWS_WITH(ops::bmm(a, a), Catch::Contains("bmm(): inner dimensions differ: op(a) is [..., 3, 4] and op(b) is "
                                                    "[..., 3, 4]") &&
                                        Catch::Contains("set trans_a/trans_b"));
  CHECK_NOTHROW(ops::bmm(a, a, false, true));
  Tensor out = Tensor::zeros({2, 3, 4});
  CHECK_THROWS_WITH(ops::bmm_(out, a, b, false, false),
                    Catch::Contains("bmm_() expects out of shape [2, 3, 5] for a [2, 3, 4] and b [2, 4, 5], but got "
                                    "[2, 3, 4]"));
  Tensor strided = Tensor::zeros({2, 5, 3}).transpose(1, 2);
  CHECK_THROWS_AS(ops::bmm_(strided, a, b, false, false), ValueError);
  CHECK_THROWS_WITH(ops::bmm_(strided, a, b, false, false), Catch::Contains("out must be contiguous"));
  Tensor f64 = Tensor::zeros({2, 3, 5}, DType::F64);
  CHECK_THROWS_AS(ops::bmm_(f64, a, b, false, false), DTypeError);
}
