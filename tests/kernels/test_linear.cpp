// cpu::gemm (OpenBLAS + epilogue) against hand-computed values and the double-accumulator reference.
#include <catch2/catch.hpp>
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "support/compare.h"
#include "support/data.h"
#include "support/threads.h"

#if EMBER_HAS_CUDA
#include "core/device.h"
#endif

namespace {

using ember::kernels::Epilogue;
namespace cpu = ember::kernels::cpu;

struct Problem {
  bool trans_a = false, trans_b = false;
  int64_t M = 1, N = 1, K = 1;
  double alpha = 1, beta = 0;
  Epilogue epilogue = Epilogue::None;
  int64_t pad = 0;  // extra elements at the end of every stored row of A, B and C
};

// Runs cpu::gemm and gemm_reference on the same inputs; beta == 0 prefills C with NaN, so an unwritten element (or a
// 0 * NaN) fails. C's padding starts as NaN in both and must come back untouched.
template <typename T>
void check_against_reference(const Problem &p, uint32_t seed = 1) {
  const int64_t a_rows = p.trans_a ? p.K : p.M, a_cols = p.trans_a ? p.M : p.K;
  const int64_t b_rows = p.trans_b ? p.N : p.K, b_cols = p.trans_b ? p.K : p.N;
  const int64_t lda = std::max<int64_t>(1, a_cols) + p.pad, ldb = std::max<int64_t>(1, b_cols) + p.pad;
  const int64_t ldc = std::max<int64_t>(1, p.N) + p.pad;
  auto A = ember::test::random_values<T>(static_cast<size_t>(a_rows * lda), seed, -1, 1);
  auto B = ember::test::random_values<T>(static_cast<size_t>(b_rows * ldb), seed + 1, -1, 1);
  auto bias = ember::test::random_values<T>(static_cast<size_t>(p.N), seed + 2, -1, 1);
  auto C = ember::test::random_values<T>(static_cast<size_t>(p.M * ldc), seed + 3, -1, 1);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < ldc; ++j)
      if (p.beta == 0 || j >= p.N) C[static_cast<size_t>(i * ldc + j)] = nan;
  auto expected = C;
  const T alpha = static_cast<T>(p.alpha), beta = static_cast<T>(p.beta);
  cpu::gemm<T>(p.trans_a, p.trans_b, p.M, p.N, p.K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc,
               bias.data(), p.epilogue);
  cpu::gemm_reference<T>(p.trans_a, p.trans_b, p.M, p.N, p.K, alpha, A.data(), lda, B.data(), ldb, beta,
                         expected.data(), ldc, bias.data(), p.epilogue);
  INFO("trans_a=" << p.trans_a << " trans_b=" << p.trans_b << " M=" << p.M << " N=" << p.N << " K=" << p.K
                  << " alpha=" << p.alpha << " beta=" << p.beta << " epilogue=" << static_cast<int>(p.epilogue)
                  << " pad=" << p.pad);
  REQUIRE_CLOSE(C, expected, ember::test::gemm_tolerance<T>(p.K));
}

// Stores the row-major (rows, cols) matrix m transposed, as (cols, rows).
std::vector<double> transposed(const std::vector<double> &m, int64_t rows, int64_t cols) {
  std::vector<double> t(m.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[static_cast<size_t>(j * rows + i)] = m[static_cast<size_t>(i * cols + j)];
  return t;
}

}  // namespace

TEST_CASE("cpu gemm: hand-computed 2x3x2 product, every layout and epilogue", "[kernels]") {
  // op(A) = [[1, 2, 3], [4, 5, 6]], op(B) = [[1, -1], [0, 2], [-2, 1]] -> op(A) op(B) = [[-5, 6], [-8, 12]]
  const std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {1, -1, 0, 2, -2, 1}, bias = {3, -20};
  const std::vector<double> c0 = {1, 2, 3, 4};
  // alpha = 2, beta = 0.5: 2 * AB + 0.5 * C0 = [[-9.5, 13], [-14.5, 26]]
  const std::vector<double> plain = {-9.5, 13, -14.5, 26}, with_bias = {-6.5, -7, -11.5, 6}, relu = {0, 0, 0, 6};
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const auto A = ta ? transposed(a, 2, 3) : a;  // stored (K, M) = (3, 2) when trans_a
      const auto B = tb ? transposed(b, 3, 2) : b;  // stored (N, K) = (2, 3) when trans_b
      const int64_t lda = ta ? 2 : 3, ldb = tb ? 3 : 2;
      for (auto [epilogue, expected] : {std::pair{Epilogue::None, plain}, std::pair{Epilogue::Bias, with_bias},
                                        std::pair{Epilogue::BiasRelu, relu}}) {
        INFO("trans_a=" << ta << " trans_b=" << tb << " epilogue=" << static_cast<int>(epilogue));
        auto C = c0, R = c0;
        cpu::gemm<double>(ta, tb, 2, 2, 3, 2.0, A.data(), lda, B.data(), ldb, 0.5, C.data(), 2, bias.data(), epilogue);
        cpu::gemm_reference<double>(ta, tb, 2, 2, 3, 2.0, A.data(), lda, B.data(), ldb, 0.5, R.data(), 2, bias.data(),
                                    epilogue);
        REQUIRE_CLOSE(C, expected, ember::test::kF64);
        REQUIRE_CLOSE(R, expected, ember::test::kF64);
      }
    }
  }
}

TEMPLATE_TEST_CASE("cpu gemm matches the reference over layouts and awkward shapes", "[kernels]", float, double) {
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1},   {1, 7, 1},    {5, 1, 3},    {3, 4, 1},
                                                      {37, 53, 29}, {17, 130, 9}, {64, 64, 64}, {129, 65, 257}};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const auto &s : shapes) check_against_reference<TestType>({ta, tb, s[0], s[1], s[2]});
}

TEMPLATE_TEST_CASE("cpu gemm: alpha, beta and every epilogue", "[kernels]", float, double) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::BiasRelu})
        for (double beta : {0.0, 1.0, -1.25}) check_against_reference<TestType>({ta, tb, 37, 53, 29, 0.75, beta, e});
}

TEMPLATE_TEST_CASE("cpu gemm: padded leading dimensions leave the padding alone", "[kernels]", float, double) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      check_against_reference<TestType>({ta, tb, 19, 23, 11, 1.5, 0.5, Epilogue::BiasRelu, /*pad=*/3});
}

TEMPLATE_TEST_CASE("cpu gemm: the MLP's shapes", "[kernels]", float, double) {
  check_against_reference<TestType>({false, true, 128, 256, 784, 1, 0, Epilogue::BiasRelu});  // y1 = relu(x W1^T + b1)
  check_against_reference<TestType>({false, true, 128, 10, 256, 1, 0, Epilogue::Bias});       // logits
  check_against_reference<TestType>({true, false, 256, 784, 128, 1, 1});                      // dW1 += dy^T x
  check_against_reference<TestType>({false, false, 128, 256, 10});                            // dx = dy W2
}

TEST_CASE("gemm_tiles cuts C into at most kGemmMaxTiles aligned tiles, by size alone", "[kernels]") {
  for (int64_t M : {1, 16, 17, 128, 130, 256, 1000})
    for (int64_t N : {1, 10, 128, 256, 784})
      for (int64_t K : {1, 10, 128, 784}) {
        const cpu::GemmTiles t = cpu::gemm_tiles(M, N, K);
        const int64_t side = t.split_rows ? M : N;
        INFO("M=" << M << " N=" << N << " K=" << K << " -> " << t.count << " tiles of " << t.step);
        CHECK(t.count >= 1);
        CHECK(t.count <= cpu::kGemmMaxTiles);
        CHECK(t.step % cpu::kGemmTileAlign == 0);
        CHECK(t.count * t.step >= side);           // every row or column in a tile
        CHECK((t.count - 1) * t.step < side);      // and no empty tile
        if (2.0 * double(M) * double(N) * double(K) < 2 * cpu::kGemmMinTileFlops) CHECK(t.count == 1);
        if (2.0 * double(M) * double(N) * double(K) >= 2 * cpu::kGemmMinTileFlops && std::max(M, N) > 16)
          CHECK(t.count == 2);  // a big product is cut if either side has room for two tiles
      }
}

TEST_CASE("gemm_tiles cuts the side whose tiles re-read less, and weight gradients by rows", "[kernels]") {
  struct Case {
    int64_t M, N, K;
    bool rows;
    const char *what;
  };
  for (const Case &c : {Case{128, 256, 784, false, "y1 = x W1^T at batch 128: W1's rows, packed once each"},
                        Case{512, 256, 784, true, "y1 at batch 512: x is the larger operand"},
                        Case{256, 784, 32, true, "dW1 += dy^T x at batch 32: rows, as the optimizer reads dW1"},
                        Case{256, 784, 512, false, "dW1 at batch 512: re-packing x (512 x 784) would cost more"},
                        Case{16, 100000, 4, false, "rows preferred but only 16 of them: columns"}}) {
    INFO(c.what);
    const cpu::GemmTiles t = cpu::gemm_tiles(c.M, c.N, c.K);
    CHECK(t.split_rows == c.rows);
    CHECK(t.count == 2);
  }
}

TEMPLATE_TEST_CASE("cpu gemm: tiled products (rows or columns cut) match the reference at 1 and 2 threads", "[kernels]",
                   float, double) {
  for (int threads : {1, 2}) {
    ember::test::ThreadsScope scope(threads);
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (Epilogue e : {Epilogue::None, Epilogue::BiasRelu}) {
          check_against_reference<TestType>({ta, tb, 130, 70, 120, 1.5, 0.5, e, /*pad=*/3});  // rows cut
          check_against_reference<TestType>({ta, tb, 70, 131, 120, 1.0, 0.0, e, /*pad=*/1});  // columns cut
        }
  }
}

TEMPLATE_TEST_CASE("cpu gemm gives the same bits at 1, 2 and 3 threads", "[kernels]", float, double) {
  using T = TestType;
  struct Shape {
    bool ta, tb;
    int64_t M, N, K;
    Epilogue e;
  };
  // The MLP's GEMMs at batch 32, 128 and 512, and shapes whose tiles end off the alignment.
  std::vector<Shape> shapes = {{false, false, 130, 70, 120, Epilogue::None}, {true, true, 70, 131, 120, Epilogue::Bias}};
  for (int64_t B : {32, 128, 512}) {
    shapes.push_back({false, true, B, 256, 784, Epilogue::BiasRelu});
    shapes.push_back({true, false, 256, 784, B, Epilogue::None});
    shapes.push_back({false, false, B, 256, 128, Epilogue::None});
  }
  for (const Shape& s : shapes) {
    const int64_t lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    const auto A = ember::test::random_values<T>(s.M * s.K, 11, -1, 1);
    const auto B = ember::test::random_values<T>(s.K * s.N, 12, -1, 1);
    const auto bias = ember::test::random_values<T>(s.N, 13, -1, 1);
    const auto C0 = ember::test::random_values<T>(s.M * s.N, 14, -1, 1);
    std::vector<std::vector<T>> results;
    for (int threads : {1, 2, 3}) {
      ember::test::ThreadsScope scope(threads);
      auto C = C0;
      cpu::gemm<T>(s.ta, s.tb, s.M, s.N, s.K, T(1), A.data(), lda, B.data(), ldb, T(0.5), C.data(), s.N, bias.data(),
                   s.e);
      results.push_back(C);
    }
    INFO("trans_a=" << s.ta << " trans_b=" << s.tb << " M=" << s.M << " N=" << s.N << " K=" << s.K);
    CHECK(results[1] == results[0]);
    CHECK(results[2] == results[0]);
  }
}

TEMPLATE_TEST_CASE("cpu gemm: K == 0 gives beta * C + bias without touching A or B", "[kernels]", float, double) {
  using T = TestType;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> bias = {1, -2, 3};
  std::vector<T> C = {nan, nan, nan, nan, nan, nan};
  // beta == 0: C is not read, so the NaNs vanish; null A and B are fine because nothing is multiplied.
  cpu::gemm<T>(false, false, 2, 3, 0, T(1), nullptr, 1, nullptr, 3, T(0), C.data(), 3, bias.data(), Epilogue::BiasRelu);
  REQUIRE_CLOSE(C, (std::vector<T>{1, 0, 3, 1, 0, 3}), ember::test::kExact);
  C = {1, 2, 3, 4, 5, 6};
  cpu::gemm<T>(true, true, 2, 3, 0, T(1), nullptr, 2, nullptr, 1, T(2), C.data(), 3, bias.data(), Epilogue::Bias);
  REQUIRE_CLOSE(C, (std::vector<T>{3, 2, 9, 9, 8, 15}), ember::test::kExact);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (double beta : {0.0, 0.5}) check_against_reference<T>({ta, tb, 7, 5, 0, 1, beta, Epilogue::Bias});
}

TEMPLATE_TEST_CASE("cpu gemm: alpha == 0 does not read A or B", "[kernels]", float, double) {
  using T = TestType;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> A(6, nan), B(6, nan);
  std::vector<T> C = {1, 2, 3, 4};
  cpu::gemm<T>(false, false, 2, 2, 3, T(0), A.data(), 3, B.data(), 2, T(-1), C.data(), 2, nullptr, Epilogue::None);
  REQUIRE_CLOSE(C, (std::vector<T>{-1, -2, -3, -4}), ember::test::kExact);
}

// ops::relu and the reference keep a NaN (`v < 0 ? 0 : v`); std::max(T(0), v) would turn it into 0. The NaN reaches
// the epilogue from C (read because beta != 0) in row 0 and from A in row 1; the bias makes every other output
// negative, so ReLU must give exactly 0 there.
TEMPLATE_TEST_CASE("cpu gemm: the ReLU epilogue keeps a NaN from C (beta != 0) or from A", "[kernels]", float, double) {
  using T = TestType;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> A = {1, -2, 0.5, nan, 1, 1};                // (2, 3)
  const std::vector<T> B = {1, 0, 2, -1, 1, 0, 0.5, 0.25, -1};     // (3, 3)
  const std::vector<T> bias = {-100, -100, -100};
  const std::vector<T> c0 = {1, nan, 2, 3, 4, 5};                  // (2, 3)
  const std::vector<T> expected = {0, nan, 0, nan, nan, nan};
  for (T beta : {T(1), T(-0.5)}) {
    INFO("beta=" << beta);
    auto C = c0, R = c0;
    cpu::gemm<T>(false, false, 2, 3, 3, T(1), A.data(), 3, B.data(), 3, beta, C.data(), 3, bias.data(),
                 Epilogue::BiasRelu);
    cpu::gemm_reference<T>(false, false, 2, 3, 3, T(1), A.data(), 3, B.data(), 3, beta, R.data(), 3, bias.data(),
                           Epilogue::BiasRelu);
    REQUIRE_CLOSE(C, expected, ember::test::kExact);
    REQUIRE_CLOSE(R, expected, ember::test::kExact);
  }
}

TEST_CASE("cpu gemm: M == 0 or N == 0 writes nothing", "[kernels]") {
  std::vector<float> A(12, 1), B(12, 1), C(12, 7), bias(4, 1);
  cpu::gemm<float>(false, false, 0, 4, 3, 1, A.data(), 3, B.data(), 4, 0, C.data(), 4, bias.data(), Epilogue::Bias);
  cpu::gemm<float>(false, false, 3, 0, 4, 1, A.data(), 4, B.data(), 1, 0, C.data(), 1, bias.data(), Epilogue::Bias);
  cpu::gemm<float>(false, false, 0, 0, 0, 1, nullptr, 1, nullptr, 1, 0, nullptr, 1, nullptr, Epilogue::None);
  REQUIRE_CLOSE(C, std::vector<float>(12, 7), ember::test::kExact);
}

TEST_CASE("cpu gemm rejects bad sizes, leading dimensions and a missing bias", "[kernels]") {
  std::vector<float> A(64, 1), B(64, 1), C(64, 0), bias(8, 0);
  auto run = [&](bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
                 const float *b, Epilogue e) {
    cpu::gemm<float>(ta, tb, M, N, K, 1, A.data(), lda, B.data(), ldb, 0, C.data(), ldc, b, e);
  };
  using ember::ValueError;
  REQUIRE_NOTHROW(run(false, false, 4, 4, 4, 4, 4, 4, nullptr, Epilogue::None));
  REQUIRE_THROWS_AS(run(false, false, -1, 4, 4, 4, 4, 4, nullptr, Epilogue::None), ValueError);
  REQUIRE_THROWS_AS(run(false, false, 4, 4, -2, 4, 4, 4, nullptr, Epilogue::None), ValueError);
  REQUIRE_THROWS_AS(run(false, false, 4, 5, 6, 5, 5, 5, nullptr, Epilogue::None), ValueError);  // lda < K
  REQUIRE_THROWS_AS(run(true, false, 5, 4, 3, 4, 4, 4, nullptr, Epilogue::None), ValueError);   // lda < M
  REQUIRE_THROWS_AS(run(false, true, 4, 4, 5, 5, 4, 4, nullptr, Epilogue::None), ValueError);   // ldb < K
  REQUIRE_THROWS_AS(run(false, false, 4, 6, 4, 4, 5, 6, nullptr, Epilogue::None), ValueError);  // ldb < N
  REQUIRE_THROWS_AS(run(false, false, 4, 6, 4, 4, 6, 5, nullptr, Epilogue::None), ValueError);  // ldc < N
  REQUIRE_THROWS_AS(run(false, false, 4, 4, 4, 4, 4, 4, nullptr, Epilogue::Bias), ValueError);
  REQUIRE_THROWS_WITH(run(false, false, 4, 4, 4, 4, 4, 4, nullptr, Epilogue::BiasRelu),
                      Catch::Contains("needs a bias"));
  REQUIRE_THROWS_WITH(run(false, false, 4, 5, 6, 5, 5, 5, nullptr, Epilogue::None), Catch::Contains("lda=5"));
}

#if EMBER_HAS_CUDA
// Without a usable GPU (this machine), both CUDA GEMMs must fail with CudaError, not crash; bad arguments are
// rejected before any CUDA call, the same way as on the host.
TEST_CASE("cuda gemms without a GPU: CudaError, and the same argument checks", "[kernels]") {
  namespace kcuda = ember::kernels::cuda;
  std::vector<float> A(16, 1), B(16, 1), C(16, 0);
  REQUIRE_THROWS_AS(kcuda::gemm<float>(false, false, 4, 4, 4, 1, A.data(), 3, B.data(), 4, 0, C.data(), 4, nullptr,
                                       Epilogue::None, nullptr),
                    ember::ValueError);
  REQUIRE_THROWS_AS(kcuda::gemm_cublas<float>(false, false, 4, 4, 4, 1, A.data(), 4, B.data(), 4, 0, C.data(), 4,
                                              nullptr, Epilogue::Bias, nullptr),
                    ember::ValueError);
  if (ember::cuda::is_available()) return;  // the [cuda] tests cover the GPU path
  REQUIRE_THROWS_AS(kcuda::gemm<float>(false, false, 4, 4, 4, 1, A.data(), 4, B.data(), 4, 0, C.data(), 4, nullptr,
                                       Epilogue::None, nullptr),
                    ember::CudaError);
  REQUIRE_THROWS_AS(kcuda::gemm_cublas<double>(false, false, 2, 2, 2, 1, nullptr, 2, nullptr, 2, 0, nullptr, 2,
                                               nullptr, Epilogue::None, nullptr),
                    ember::ValueError);  // null C with a 2x2 output
  // K == 0 skips cuBLAS and launches only the epilogue kernel: its launch check must throw too.
  REQUIRE_THROWS_AS(kcuda::gemm_cublas<float>(false, false, 4, 4, 0, 1, nullptr, 1, nullptr, 4, 0, C.data(), 4,
                                              nullptr, Epilogue::None, nullptr),
                    ember::CudaError);
  std::vector<double> Ad(4, 1), Bd(4, 1), Cd(4, 0);
  REQUIRE_THROWS_AS(kcuda::gemm_cublas<double>(false, false, 2, 2, 2, 1, Ad.data(), 2, Bd.data(), 2, 0, Cd.data(), 2,
                                               nullptr, Epilogue::None, nullptr),
                    ember::CudaError);
}
#endif

TEMPLATE_TEST_CASE("gemm_group gives every call exactly gemm's bits, at 1, 2 and 3 threads", "[kernels]", float,
                   double) {
  using T = TestType;
  // A Linear layer's backward at batch 128 (dW += dy^T x, dx = dy W), plus a third call whose tiles end off the
  // alignment: three calls of two tiles each, claimed together.
  const int64_t B = 128, out = 256, in = 130;
  const auto dy = ember::test::random_values<T>(B * out, 21, -1, 1);
  const auto x = ember::test::random_values<T>(B * in, 22, -1, 1);
  const auto w = ember::test::random_values<T>(out * in, 23, -1, 1);
  const auto dw0 = ember::test::random_values<T>(out * in, 24, -1, 1);
  std::vector<T> dw_alone = dw0, dx_alone(B * in), y_alone(B * out);
  cpu::gemm<T>(true, false, out, in, B, T(1), dy.data(), out, x.data(), in, T(1), dw_alone.data(), in, nullptr,
               Epilogue::None);
  cpu::gemm<T>(false, false, B, in, out, T(1), dy.data(), out, w.data(), in, T(0), dx_alone.data(), in, nullptr,
               Epilogue::None);
  cpu::gemm<T>(false, true, B, out, in, T(1), x.data(), in, w.data(), in, T(0), y_alone.data(), out, nullptr,
               Epilogue::None);
  for (int threads : {1, 2, 3}) {
    ember::test::ThreadsScope scope(threads);
    std::vector<T> dw = dw0, dx(B * in), y(B * out);
    const cpu::GemmCall<T> calls[3] = {
        {true, false, out, in, B, T(1), dy.data(), out, x.data(), in, T(1), dw.data(), in},
        {false, false, B, in, out, T(1), dy.data(), out, w.data(), in, T(0), dx.data(), in},
        {false, true, B, out, in, T(1), x.data(), in, w.data(), in, T(0), y.data(), out}};
    cpu::gemm_group<T>(calls, 3);
    INFO("threads=" << threads);
    CHECK(dw == dw_alone);
    CHECK(dx == dx_alone);
    CHECK(y == y_alone);
  }
  const cpu::GemmCall<T> bad{false, false, 2, 2, 2, T(1), nullptr, 2, nullptr, 2, T(0), nullptr, 1};
  CHECK_THROWS_WITH(cpu::gemm_group<T>(&bad, 1), Catch::Contains("ldc=1 is smaller than a row of C"));
  std::vector<cpu::GemmCall<T>> five(5, bad);
  CHECK_THROWS_WITH(cpu::gemm_group<T>(five.data(), 5), Catch::Contains("at most 4"));
}

TEST_CASE("OpenBLAS runs on one thread from the moment ember is loaded, before any GEMM", "[kernels]") {
  // CTest runs this case in a process of its own, so no GEMM has set it yet: the setting made at load time holds.
  // The first GEMMs may run inside pool tasks on several threads at once, and none of them should set it then.
  CHECK(openblas_get_num_threads() == 1);
}
