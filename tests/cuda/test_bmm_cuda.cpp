// cuda::bmm (hand-written) and cuda::bmm_cublas against cpu::bmm and each other: every layout, batch 1 and odd sizes
// off the tile edges, gaps between the batch's matrices (aligned and not), alpha and beta, NaN-prefilled outputs
// with guard elements, and ops::bmm on cuda:0 under both backends.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/cuda_check.h"
#include "core/ops.h"
#include "kernels/bmm.h"
#include "support/compare.h"
#include "support/data.h"
#include "support/device_array.h"
#include "support/emulated_size.h"

namespace {

using ember::test::DeviceArray;
using ember::test::random_values;
namespace kc = ember::kernels::cpu;
namespace kg = ember::kernels::cuda;

struct Case {
  bool trans_a = false, trans_b = false;
  int64_t batch = 1, M = 1, N = 1, K = 1;
  double alpha = 1, beta = 0;
  int64_t pad = 0;  // extra elements per stored row (pad % 4 != 0: the scalar loads)
  int64_t gap = 0;  // extra elements after every matrix (gap % 4 != 0 misaligns every other batch's base)
};

constexpr int64_t kGuard = 5;  // NaN elements after the last C: a write past it shows up as a mismatch

// Runs both CUDA batched GEMMs and compares them with cpu::bmm (and each other). C starts as NaN wherever it must
// not be read or written (beta == 0, padding, gaps, guard), so a missed or stray write fails.
template <typename T>
void check_case(const Case &c, unsigned seed = 11) {
  const int64_t a_rows = c.trans_a ? c.K : c.M, b_rows = c.trans_b ? c.N : c.K;
  const int64_t lda = std::max<int64_t>(1, c.trans_a ? c.M : c.K) + c.pad;
  const int64_t ldb = std::max<int64_t>(1, c.trans_b ? c.K : c.N) + c.pad;
  const int64_t ldc = std::max<int64_t>(1, c.N) + c.pad;
  const int64_t stride_a = a_rows * lda + c.gap, stride_b = b_rows * ldb + c.gap, stride_c = c.M * ldc + c.gap;
  const auto A = random_values<T>(std::max<int64_t>(1, c.batch * stride_a), seed, -1, 1);
  const auto B = random_values<T>(std::max<int64_t>(1, c.batch * stride_b), seed + 1, -1, 1);
  auto C = random_values<T>(c.batch * stride_c + kGuard, seed + 2, -1, 1);
  for (int64_t e = 0; e < static_cast<int64_t>(C.size()); ++e) {
    const int64_t at = e % stride_c;
    const bool inside = e < c.batch * stride_c && at < c.M * ldc && at % ldc < c.N;
    if (!inside || c.beta == 0) C[static_cast<size_t>(e)] = std::numeric_limits<T>::quiet_NaN();
  }
  const T alpha = static_cast<T>(c.alpha), beta = static_cast<T>(c.beta);
  auto expected = C;
  kc::bmm<T>(c.trans_a, c.trans_b, c.batch, c.M, c.N, c.K, alpha, A.data(), lda, stride_a, B.data(), ldb, stride_b,
             beta, expected.data(), ldc, stride_c);

  DeviceArray<T> dA(A), dB(B), dC(C), dC_cublas(C);
  kg::bmm<T>(c.trans_a, c.trans_b, c.batch, c.M, c.N, c.K, alpha, dA.ptr, lda, stride_a, dB.ptr, ldb, stride_b, beta,
             dC.ptr, ldc, stride_c, nullptr);
  kg::bmm_cublas<T>(c.trans_a, c.trans_b, c.batch, c.M, c.N, c.K, alpha, dA.ptr, lda, stride_a, dB.ptr, ldb, stride_b,
                    beta, dC_cublas.ptr, ldc, stride_c, nullptr);
  const auto ours = dC.host(), theirs = dC_cublas.host();
  INFO("trans_a=" << c.trans_a << " trans_b=" << c.trans_b << " batch=" << c.batch << " M=" << c.M << " N=" << c.N
                  << " K=" << c.K << " alpha=" << c.alpha << " beta=" << c.beta << " pad=" << c.pad
                  << " gap=" << c.gap);
  const auto tol = ember::test::gemm_tolerance<T>(c.K);
  {
    INFO("cuda::bmm vs cpu::bmm");
    REQUIRE_CLOSE(ours, expected, tol);
  }
  {
    INFO("cuda::bmm_cublas vs cpu::bmm");
    REQUIRE_CLOSE(theirs, expected, tol);
  }
}

template <typename T>
void all_layouts(Case c) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      c.trans_a = ta;
      c.trans_b = tb;
      check_case<T>(c);
    }
}

}  // namespace

TEMPLATE_TEST_CASE("cuda bmm: batch 1, odd and tile-edge shapes in every layout", "[cuda]", float, double) {
  const std::vector<std::array<int64_t, 4>> shapes = {{1, 1, 1, 1},   {3, 1, 1, 7},   {1, 7, 5, 3},
                                                      {5, 17, 17, 16}, {3, 33, 31, 17}, {2, 65, 63, 33}};
  for (const auto &s : shapes) all_layouts<TestType>({false, false, s[0], s[1], s[2], s[3]});
}

// gap 1 misaligns every other matrix of a batch whose rows are 16-byte multiples: the 16-byte loads and stores must
// step aside for them (on a GPU a misaligned float4 access faults; the emulated build's UBSan reports it).
TEMPLATE_TEST_CASE("cuda bmm: gaps and padding between and inside the batch's matrices", "[cuda]", float, double) {
  all_layouts<TestType>({false, false, 3, 16, 16, 8, 1, 0, /*pad=*/0, /*gap=*/1});
  all_layouts<TestType>({false, false, 3, 16, 12, 20, 1, 0, /*pad=*/0, /*gap=*/4});
  all_layouts<TestType>({false, false, 4, 19, 23, 11, 1, 0, /*pad=*/3, /*gap=*/2});
}

TEMPLATE_TEST_CASE("cuda bmm: alpha, beta and K == 0", "[cuda]", float, double) {
  for (double beta : {0.0, 1.0, -1.25}) {
    all_layouts<TestType>({false, false, 3, 37, 29, 21, 0.75, beta});
    all_layouts<TestType>({false, false, 3, 9, 7, 0, 1, beta, /*pad=*/1});
    check_case<TestType>({true, false, 2, 9, 7, 5, 0.0, beta});  // alpha == 0: A and B unread
  }
}

// Enough blocks for the larger tilings on a GPU; past gridDim.z's 65535 there (several launches); small emulated.
TEST_CASE("cuda bmm: larger products and a batch past one grid's depth", "[cuda]") {
  const int64_t n = ember::test::gpu_or_emulated(256, 96);
  all_layouts<float>({false, false, 4, n, n + 1, 64});
  check_case<double>({false, true, 3, n, n - 1, 65});
  check_case<float>({false, true, ember::test::gpu_or_emulated(70001, 7), 3, 5, 2});
}

TEST_CASE("cuda bmm: batch 0 or an empty matrix launches nothing and writes nothing", "[cuda]") {
  DeviceArray<float> dA(std::vector<float>(16, 1)), dB(std::vector<float>(16, 1)), dC(std::vector<float>(16, 7));
  using Bmm = void (*)(bool, bool, int64_t, int64_t, int64_t, int64_t, float, const float *, int64_t, int64_t,
                       const float *, int64_t, int64_t, float, float *, int64_t, int64_t, ember::kernels::Stream);
  for (Bmm run : {Bmm{kg::bmm<float>}, Bmm{kg::bmm_cublas<float>}}) {
    run(false, false, 0, 2, 2, 2, 1, dA.ptr, 2, 4, dB.ptr, 2, 4, 0, dC.ptr, 2, 4, nullptr);
    run(false, false, 4, 0, 2, 2, 1, dA.ptr, 2, 4, dB.ptr, 2, 4, 0, dC.ptr, 2, 4, nullptr);
    CHECK_THROWS_WITH(run(false, false, 2, 2, 2, 2, 1, dA.ptr, 2, 4, dB.ptr, 2, 4, 0, dC.ptr, 2, 3, nullptr),
                      Catch::Contains("stride_c=3 is smaller than one output matrix"));
  }
  REQUIRE_CLOSE(dC.host(), std::vector<float>(16, 7), ember::test::kExact);
}

TEST_CASE("ops::bmm on cuda:0 matches the cpu under both GEMM backends, on views too", "[cuda]") {
  using namespace ember;
  const Tensor a = Tensor::rand({2, 3, 21, 13}, 1, DType::F32, Device::cpu(), -1, 1);
  const Tensor b = Tensor::rand({2, 3, 19, 13}, 2, DType::F32, Device::cpu(), -1, 1);
  const Tensor want = ops::bmm(a, b.transpose(-1, -2));
  struct Restore {
    ops::GemmBackend saved = ops::gemm_backend();
    ~Restore() { ops::set_gemm_backend(saved); }
  } restore;
  for (ops::GemmBackend backend : {ops::GemmBackend::Ember, ops::GemmBackend::Cublas}) {
    ops::set_gemm_backend(backend);
    INFO("backend " << (backend == ops::GemmBackend::Cublas ? "cublas" : "ember"));
    const Tensor got = ops::bmm(a.to(Device::cuda(0)), b.to(Device::cuda(0)).transpose(-1, -2));
    REQUIRE_CLOSE(got.to(Device::cpu()).to_vector<float>(), want.to_vector<float>(), test::gemm_f32(13));
    Tensor acc = want.to(Device::cuda(0));
    ops::bmm_(acc, a.to(Device::cuda(0)), b.to(Device::cuda(0)), false, true, -1, 1);  // want - a b^T = 0
    REQUIRE_CLOSE(acc.to(Device::cpu()).to_vector<float>(), std::vector<float>(want.numel(), 0.0f),
                  test::gemm_f32(13));
  }
}
