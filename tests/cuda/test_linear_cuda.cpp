// cuda::gemm (hand-written) and cuda::gemm_cublas against cpu::gemm and each other: layouts, odd and tile-crossing
// shapes, misaligned pointers and leading dimensions, epilogues, NaN-prefilled outputs with guard elements.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/cuda_check.h"
#include "kernels/linear.h"
#include "support/compare.h"
#include "support/data.h"
#include "support/device_array.h"
#include "support/emulated_size.h"

namespace {

using ember::test::DeviceArray;
using ember::test::random_values;
using ember::kernels::Epilogue;
namespace kc = ember::kernels::cpu;
namespace kg = ember::kernels::cuda;

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream() { cudaStreamDestroy(s); }
};

// Which tiling cuda::gemm picks (mirrors its heuristic), only for the failure report.
const char *tiling_for(bool is_float, int64_t M, int64_t N) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  auto blocks = [&](int64_t b) { return ((M + b - 1) / b) * ((N + b - 1) / b); };
  if (is_float && blocks(128) >= sms) return "128x128";
  return blocks(64) >= sms ? "64x64" : "32x32";
}

struct Case {
  bool trans_a = false, trans_b = false;
  int64_t M = 1, N = 1, K = 1;
  double alpha = 1, beta = 0;
  Epilogue epilogue = Epilogue::None;
  int64_t pad = 0;     // extra elements per stored row of A, B, C (pad % 4 != 0 forces the scalar-load path)
  int64_t offset = 0;  // elements before A, B, C, bias in their buffers (1 misaligns the 16-byte loads)
};

constexpr int64_t kGuard = 5;  // NaN elements after C: a write past its last row shows up as a mismatch

// Runs both CUDA GEMMs on a non-default stream and compares them with cpu::gemm (and with each other). C starts as
// NaN where it must not be read or written (beta == 0, padding, offset, guard), so a missed or stray write fails.
template <typename T>
void check_case(const Case &c, uint32_t seed = 7) {
  const int64_t a_rows = c.trans_a ? c.K : c.M, a_cols = c.trans_a ? c.M : c.K;
  const int64_t b_rows = c.trans_b ? c.N : c.K, b_cols = c.trans_b ? c.K : c.N;
  const int64_t lda = std::max<int64_t>(1, a_cols) + c.pad, ldb = std::max<int64_t>(1, b_cols) + c.pad;
  const int64_t ldc = std::max<int64_t>(1, c.N) + c.pad;
  const auto off = static_cast<size_t>(c.offset);
  auto A = random_values<T>(off + static_cast<size_t>(a_rows * lda), seed, -1, 1);
  auto B = random_values<T>(off + static_cast<size_t>(b_rows * ldb), seed + 1, -1, 1);
  auto bias = random_values<T>(off + static_cast<size_t>(c.N), seed + 2, -1, 1);
  auto C = random_values<T>(off + static_cast<size_t>(c.M * ldc + kGuard), seed + 3, -1, 1);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (size_t i = 0; i < C.size(); ++i) {
    const bool inside = i >= off && i < off + static_cast<size_t>(c.M * ldc) &&
                        static_cast<int64_t>(i - off) % ldc < c.N;
    if (!inside || c.beta == 0) C[i] = nan;
  }
  const T alpha = static_cast<T>(c.alpha), beta = static_cast<T>(c.beta);
  auto expected = C;
  kc::gemm<T>(c.trans_a, c.trans_b, c.M, c.N, c.K, alpha, A.data() + off, lda, B.data() + off, ldb, beta,
              expected.data() + off, ldc, bias.data() + off, c.epilogue);

  DeviceArray<T> dA(A), dB(B), dbias(bias), dC(C), dC_cublas(C);
  Stream stream;
  kg::gemm<T>(c.trans_a, c.trans_b, c.M, c.N, c.K, alpha, dA.ptr + off, lda, dB.ptr + off, ldb, beta, dC.ptr + off,
              ldc, dbias.ptr + off, c.epilogue, stream.s);
  kg::gemm_cublas<T>(c.trans_a, c.trans_b, c.M, c.N, c.K, alpha, dA.ptr + off, lda, dB.ptr + off, ldb, beta,
                     dC_cublas.ptr + off, ldc, dbias.ptr + off, c.epilogue, stream.s);
  CUDA_CHECK(cudaStreamSynchronize(stream.s));
  const auto ours = dC.host(), theirs = dC_cublas.host();

  INFO("trans_a=" << c.trans_a << " trans_b=" << c.trans_b << " M=" << c.M << " N=" << c.N << " K=" << c.K
                  << " alpha=" << c.alpha << " beta=" << c.beta << " epilogue=" << static_cast<int>(c.epilogue)
                  << " pad=" << c.pad << " offset=" << c.offset << " tiling="
                  << tiling_for(std::is_same_v<T, float>, c.M, c.N));
  const auto tol = ember::test::gemm_tolerance<T>(c.K);
  {
    INFO("cuda::gemm vs cpu::gemm");
    REQUIRE_CLOSE(ours, expected, tol);
  }
  {
    INFO("cuda::gemm_cublas vs cpu::gemm");
    REQUIRE_CLOSE(theirs, expected, tol);
  }
  {
    INFO("cuda::gemm vs cuda::gemm_cublas");
    REQUIRE_CLOSE(ours, theirs, tol);
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

// On an H200 (132 SMs) these small outputs take the 32x32 tiling; sizes straddle tile and slice edges.
TEMPLATE_TEST_CASE("cuda gemm: tiny, odd and tile-edge shapes in every layout", "[cuda]", float, double) {
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1},   {1, 1, 7},    {7, 1, 1},    {1, 9, 1},
                                                      {3, 5, 2},   {37, 53, 29}, {33, 31, 17}, {32, 32, 32},
                                                      {64, 64, 8}, {65, 63, 33}, {128, 128, 8}, {129, 127, 65}};
  for (const auto &s : shapes) all_layouts<TestType>({false, false, s[0], s[1], s[2]});
}

// 64x64 tiling (>= #SMs tiles of 64x64, fewer of 128x128) and, for float, the 128x128 one; odd sizes cover edges.
TEMPLATE_TEST_CASE("cuda gemm: larger shapes reach the 64x64 and 128x128 tilings", "[cuda]", float, double) {
  all_layouts<TestType>({false, false, 769, 771, 45});
  all_layouts<TestType>({false, false, 1024, 1024, 64});
  if constexpr (std::is_same_v<TestType, float>) {
    all_layouts<TestType>({false, false, 2049, 2047, 33});
    all_layouts<TestType>({false, false, 2048, 2048, 128});
  }
}

TEST_CASE("cuda gemm: a large product (1024^3, emulated 512^3) in every layout", "[cuda]") {
  const int64_t n = ember::test::gpu_or_emulated(1024, 512);
  all_layouts<float>({false, false, n, n, n});
  check_case<double>({false, true, 512, 512, 512});
}

// pad 1 makes every leading dimension odd; offset 1 misaligns every base pointer: both force the scalar loads
// (and scalar C stores); the sizes pick each tiling in turn.
TEMPLATE_TEST_CASE("cuda gemm: misaligned pointers and leading dimensions take the scalar path", "[cuda]", float,
                   double) {
  for (auto [M, N, K] : std::vector<std::array<int64_t, 3>>{{37, 53, 29}, {769, 771, 45}, {2049, 2047, 33}}) {
    Case odd_ld{false, false, M, N, K, 1, 0, Epilogue::None, /*pad=*/1, /*offset=*/0};
    Case odd_ptr{false, false, M, N, K, 1, 0, Epilogue::None, /*pad=*/0, /*offset=*/1};
    Case both{false, false, M, N, K, 0.5, 2, Epilogue::BiasRelu, /*pad=*/3, /*offset=*/1};
    all_layouts<TestType>(odd_ld);
    all_layouts<TestType>(odd_ptr);
    all_layouts<TestType>(both);
  }
  // ld % 4 == 0 with padding: the vector path with C rows that are not contiguous.
  all_layouts<TestType>({false, false, 130, 70, 41, 1, 1, Epilogue::Bias, /*pad=*/4});
}

TEMPLATE_TEST_CASE("cuda gemm: alpha, beta and every epilogue", "[cuda]", float, double) {
  for (Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::BiasRelu})
    for (double beta : {0.0, 1.0, -1.25}) {
      all_layouts<TestType>({false, false, 37, 53, 29, 0.75, beta, e});
      all_layouts<TestType>({false, false, 769, 771, 45, 0.75, beta, e});
      if constexpr (std::is_same_v<TestType, float>) check_case<TestType>({true, false, 2049, 2047, 33, 0.75, beta, e});
    }
}

TEMPLATE_TEST_CASE("cuda gemm: the MLP's shapes", "[cuda]", float, double) {
  check_case<TestType>({false, true, 128, 256, 784, 1, 0, Epilogue::BiasRelu});  // relu(x W1^T + b1)
  check_case<TestType>({false, true, 128, 10, 256, 1, 0, Epilogue::Bias});       // logits
  check_case<TestType>({true, false, 256, 784, 128, 1, 1});                      // dW1 += dy^T x
  check_case<TestType>({true, false, 10, 256, 128, 1, 1});                       // dW2 += dlogits^T h
  check_case<TestType>({false, false, 128, 256, 10});                            // dh = dlogits W2
  check_case<TestType>({false, false, 128, 784, 256});                           // dx = dh W1
}

TEMPLATE_TEST_CASE("cuda gemm: K == 0 gives beta * C + bias", "[cuda]", float, double) {
  for (double beta : {0.0, 0.5})
    for (Epilogue e : {Epilogue::None, Epilogue::BiasRelu}) all_layouts<TestType>({false, false, 33, 65, 0, 1, beta, e});
}

TEMPLATE_TEST_CASE("cuda gemm: alpha == 0 does not read A or B", "[cuda]", float, double) {
  using T = TestType;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  using Gemm = void (*)(bool, bool, int64_t, int64_t, int64_t, T, const T *, int64_t, const T *, int64_t, T, T *,
                        int64_t, const T *, Epilogue, ember::kernels::Stream);
  for (Gemm run : {Gemm{kg::gemm<T>}, Gemm{kg::gemm_cublas<T>}}) {
    DeviceArray<T> dA(std::vector<T>(6, nan)), dB(std::vector<T>(6, nan)), dC(std::vector<T>{1, 2, 3, 4});
    DeviceArray<T> dbias(std::vector<T>{10, -10});
    run(false, false, 2, 2, 3, T(0), dA.ptr, 3, dB.ptr, 2, T(-1), dC.ptr, 2, nullptr, Epilogue::None, nullptr);
    REQUIRE_CLOSE(dC.host(), (std::vector<T>{-1, -2, -3, -4}), ember::test::kExact);
    run(true, true, 2, 2, 3, T(0), dA.ptr, 2, dB.ptr, 3, T(2), dC.ptr, 2, dbias.ptr, Epilogue::BiasRelu, nullptr);
    REQUIRE_CLOSE(dC.host(), (std::vector<T>{8, 0, 4, 0}), ember::test::kExact);
  }
}

TEST_CASE("cuda gemm: M == 0 or N == 0 launches nothing and writes nothing", "[cuda]") {
  DeviceArray<float> dA(std::vector<float>(12, 1)), dB(std::vector<float>(12, 1)), dC(std::vector<float>(12, 7));
  using Gemm = void (*)(bool, bool, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *, int64_t,
                        float, float *, int64_t, const float *, Epilogue, ember::kernels::Stream);
  for (Gemm run : {Gemm{kg::gemm<float>}, Gemm{kg::gemm_cublas<float>}}) {
    run(false, false, 0, 4, 3, 1, dA.ptr, 3, dB.ptr, 4, 0, dC.ptr, 4, nullptr, Epilogue::None, nullptr);
    run(false, false, 3, 0, 4, 1, dA.ptr, 4, dB.ptr, 1, 0, dC.ptr, 1, nullptr, Epilogue::None, nullptr);
  }
  REQUIRE_CLOSE(dC.host(), std::vector<float>(12, 7), ember::test::kExact);
}

TEST_CASE("cuda gemm on the legacy default stream", "[cuda]") {
  const int64_t M = 45, N = 67, K = 23;
  auto A = random_values<float>(M * K, 1, -1, 1), B = random_values<float>(K * N, 2, -1, 1), bias = random_values<float>(N, 3, -1, 1);
  std::vector<float> expected(M * N);
  kc::gemm<float>(false, false, M, N, K, 1, A.data(), K, B.data(), N, 0, expected.data(), N, bias.data(),
                  Epilogue::Bias);
  DeviceArray<float> dA(A), dB(B), dbias(bias), dC(std::vector<float>(M * N, std::numeric_limits<float>::quiet_NaN()));
  kg::gemm<float>(false, false, M, N, K, 1, dA.ptr, K, dB.ptr, N, 0, dC.ptr, N, dbias.ptr, Epilogue::Bias, nullptr);
  REQUIRE_CLOSE(dC.host(), expected, ember::test::gemm_f32(K));
}

// The cached per-device cuBLAS handle is shared: each thread binds it to its own stream for its own call.
TEST_CASE("cuda gemm_cublas from several threads, each on its own stream", "[cuda]") {
  const int64_t M = 96, N = 80, K = 64;
  constexpr int kThreads = 4, kRounds = 25;
  std::vector<std::vector<float>> results(kThreads), expected(kThreads);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        int device = 0;
        CUDA_CHECK(cudaGetDevice(&device));
        auto A = random_values<float>(M * K, 10 + t, -1, 1), B = random_values<float>(K * N, 20 + t, -1, 1);
        expected[t].assign(M * N, 0);
        kc::gemm<float>(false, false, M, N, K, 1, A.data(), K, B.data(), N, 0, expected[t].data(), N, nullptr,
                        Epilogue::None);
        DeviceArray<float> dA(A), dB(B), dC(std::vector<float>(M * N, 0));
        Stream stream;
        for (int r = 0; r < kRounds; ++r)
          kg::gemm_cublas<float>(false, false, M, N, K, 1, dA.ptr, K, dB.ptr, N, 0, dC.ptr, N, nullptr,
                                 Epilogue::None, stream.s);
        CUDA_CHECK(cudaStreamSynchronize(stream.s));
        results[t] = dC.host();
      } catch (const std::exception &e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto &th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t << ": " << errors[t]);
    REQUIRE(errors[t].empty());
    REQUIRE_CLOSE(results[t], expected[t], ember::test::gemm_f32(K));
  }
}
