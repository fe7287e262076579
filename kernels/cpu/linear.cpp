// Host GEMM: C cut into tiles by shape, each tile one single-threaded OpenBLAS call plus its bias/ReLU pass,
// the tiles run by the host thread pool; plus the test reference.
#include "kernels/linear.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"

namespace ember::kernels {

namespace detail {

void check_gemm_args(const char *name, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const void *A,
                     int64_t lda, const void *B, int64_t ldb, const void *C, int64_t ldc, const void *bias,
                     Epilogue epilogue) {
  EMBER_CHECK(M >= 0 && N >= 0 && K >= 0, ValueError, name, ": sizes must be non-negative, got M=", M, " N=", N,
              " K=", K);
  const int64_t a_row = trans_a ? M : K;  // elements in one stored row of A
  const int64_t b_row = trans_b ? K : N;
  EMBER_CHECK(lda >= std::max<int64_t>(1, a_row), ValueError, name, ": lda=", lda, " is smaller than a stored row of A (",
              a_row, " elements, A stored as ", trans_a ? "(K, M)" : "(M, K)", ")");
  EMBER_CHECK(ldb >= std::max<int64_t>(1, b_row), ValueError, name, ": ldb=", ldb, " is smaller than a stored row of B (",
              b_row, " elements, B stored as ", trans_b ? "(N, K)" : "(K, N)", ")");
  EMBER_CHECK(ldc >= std::max<int64_t>(1, N), ValueError, name, ": ldc=", ldc, " is smaller than a row of C (N=", N, ")");
  if (M == 0 || N == 0) return;
  EMBER_CHECK(C != nullptr, ValueError, name, ": C is null for a ", M, "x", N, " output");
  EMBER_CHECK(K == 0 || (A != nullptr && B != nullptr), ValueError, name, ": A or B is null with K=", K);
  EMBER_CHECK(epilogue == Epilogue::None || bias != nullptr, ValueError, name,
              ": the Bias/BiasRelu epilogue needs a bias of N=", N, " elements, got null");
}

}  // namespace detail

namespace cpu {
namespace {

// OpenBLAS on one thread from the start, set on the loading thread before main: the first GEMMs of a process may
// run inside pool tasks on several threads at once (a CNN's convolution chunks), and none of them should then
// have to change OpenBLAS's setting.
[[maybe_unused]] const bool g_openblas_one_thread = [] {
  openblas_set_num_threads(1);
  return true;
}();

inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const double *A,
                      int lda, const double *B, int ldb, double beta, double *C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// C = beta * C where op(A) op(B) contributes nothing (K == 0 or alpha == 0); beta == 0 writes zeros, never 0 * NaN.
template <typename T>
void scale_c(int64_t M, int64_t N, T beta, T *C, int64_t ldc) {
  if (beta == T(1)) return;
  for (int64_t i = 0; i < M; ++i) {
    T *row = C + i * ldc;
    if (beta == T(0)) {
      for (int64_t j = 0; j < N; ++j) row[j] = T(0);
    } else {
      for (int64_t j = 0; j < N; ++j) row[j] *= beta;
    }
  }
}

// `v < 0 ? 0 : v` lets NaN through (as PyTorch's relu does) and compiles to a vector max/blend.
template <typename T>
void bias_epilogue(int64_t M, int64_t N, T *C, int64_t ldc, const T *bias, bool relu) {
  for (int64_t i = 0; i < M; ++i) {
    T *row = C + i * ldc;
    if (relu) {
      for (int64_t j = 0; j < N; ++j) {
        const T v = row[j] + bias[j];
        row[j] = v < T(0) ? T(0) : v;
      }
    } else {
      for (int64_t j = 0; j < N; ++j) row[j] += bias[j];
    }
  }
}

}  // namespace

std::string blas_config() { return openblas_get_config(); }
int blas_threads() { return openblas_get_num_threads(); }

GemmTiles gemm_tiles(int64_t M, int64_t N, int64_t K) {
  // What a cut costs beyond the product, in elements moved: a row cut makes every tile pack all of op(B) (K x N);
  // a column cut packs op(A) (M x K) in every tile, and also leaves C's storage split the other way from the
  // elementwise passes that read it next (they cut flat ranges, i.e. rows): with a weight gradient, the guard's
  // scan and the optimizer's update then find half of C in the other core's cache (docs/benchmarks.md,
  // "Measurements behind the code").
  const double row_cost = double(K) * double(N);
  const double column_cost = double(M) * double(K) + double(M) * double(N) / 2;
  const auto units = [](int64_t side) { return (side + kGemmTileAlign - 1) / kGemmTileAlign; };
  bool split_rows = row_cost < column_cost;
  if (units(split_rows ? M : N) < 2 && units(split_rows ? N : M) >= 2) split_rows = !split_rows;  // room for 2
  const int64_t side = split_rows ? M : N;
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const int64_t wanted = std::clamp<int64_t>(static_cast<int64_t>(flops / kGemmMinTileFlops), 1, kGemmMaxTiles);
  // Tile edges on multiples of kGemmTileAlign keep OpenBLAS's micro-kernels on full panels.
  const int64_t step = (units(side) + wanted - 1) / wanted * kGemmTileAlign;
  return {split_rows, (side + step - 1) / step, step};
}

namespace {

// Tile t of call c: C[begin:end, :] (split_rows) or C[:, begin:end], op(A) or op(B) narrowed to match.
template <typename T>
void run_tile(const GemmCall<T> &c, const GemmTiles &tiles, int64_t t) {
  const int64_t begin = t * tiles.step, end = std::min(tiles.split_rows ? c.M : c.N, begin + tiles.step);
  const int64_t m = tiles.split_rows ? end - begin : c.M, n = tiles.split_rows ? c.N : end - begin;
  const T *a = tiles.split_rows ? c.A + (c.trans_a ? begin : begin * c.lda) : c.A;
  const T *b = tiles.split_rows ? c.B : c.B + (c.trans_b ? begin * c.ldb : begin);
  T *out = c.C + (tiles.split_rows ? begin * c.ldc : begin);
  if (c.K == 0 || c.alpha == T(0)) {
    // BLAS would do the same, but K == 0 also lets callers pass lda/ldb that BLAS's own checks reject.
    scale_c(m, n, c.beta, out, c.ldc);
  } else {
    blas_gemm(c.trans_a ? CblasTrans : CblasNoTrans, c.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(c.K), c.alpha, a, static_cast<int>(c.lda), b,
              static_cast<int>(c.ldb), c.beta, out, static_cast<int>(c.ldc));
  }
  if (c.epilogue != Epilogue::None)
    bias_epilogue(m, n, out, c.ldc, c.bias + (tiles.split_rows ? 0 : begin), c.epilogue == Epilogue::BiasRelu);
}

// The checks gemm makes, then the call's tiles (none when C is empty).
template <typename T>
GemmTiles checked_tiles(const GemmCall<T> &c) {
  detail::check_gemm_args("cpu::gemm", c.trans_a, c.trans_b, c.M, c.N, c.K, c.A, c.lda, c.B, c.ldb, c.C, c.ldc,
                          c.bias, c.epilogue);
  if (c.M == 0 || c.N == 0) return {false, 0, 1};
  const int64_t largest = std::max({c.M, c.N, c.K, c.lda, c.ldb, c.ldc});
  EMBER_CHECK(largest <= INT_MAX, ValueError, "cpu::gemm: OpenBLAS takes 32-bit sizes, got a size or ld of ", largest);
  return gemm_tiles(c.M, c.N, c.K);
}

}  // namespace

template <typename T>
void gemm_group(const GemmCall<T> *calls, int count) {
  constexpr int kMaxCalls = 4;
  EMBER_CHECK(count >= 0 && count <= kMaxCalls, ValueError, "cpu::gemm_group: ", count, " calls, at most ",
              kMaxCalls);
  GemmTiles tiles[kMaxCalls];
  int64_t first[kMaxCalls + 1] = {0};  // call i owns tasks [first[i], first[i + 1])
  for (int i = 0; i < count; ++i) {
    tiles[i] = checked_tiles(calls[i]);
    first[i + 1] = first[i] + tiles[i].count;
  }
  // The pool's tiles are the parallelism; OpenBLAS threads inside them would only fight over the cores. Set at load
  // (above); set again if a caller has changed it since.
  if (first[count] > 0 && openblas_get_num_threads() != 1) openblas_set_num_threads(1);
  double flops = 0;  // for the region profile
  for (int i = 0; i < count; ++i) flops += 2.0 * double(calls[i].M) * double(calls[i].N) * double(calls[i].K);
  parallel_for(
      first[count],
      [&](int64_t task) {
        int i = 0;
        while (task >= first[i + 1]) ++i;
        run_tile(calls[i], tiles[i], task - first[i]);
      },
      "gemm_group", flops);
}

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda, const T *B,
          int64_t ldb, T beta, T *C, int64_t ldc, const T *bias, Epilogue epilogue) {
  const GemmCall<T> call{trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, epilogue};
  gemm_group(&call, 1);
}

template <typename T>
void gemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda,
                    const T *B, int64_t ldb, T beta, T *C, int64_t ldc, const T *bias, Epilogue epilogue) {
  detail::check_gemm_args("cpu::gemm_reference", trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, bias, epilogue);
  std::vector<double> acc(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    // k outside j keeps the inner loop a contiguous axpy over a row of the accumulator.
    for (int64_t k = 0; k < K && alpha != T(0); ++k) {
      const double a = static_cast<double>(trans_a ? A[k * lda + i] : A[i * lda + k]);
      for (int64_t j = 0; j < N; ++j)
        acc[j] += a * static_cast<double>(trans_b ? B[j * ldb + k] : B[k * ldb + j]);
    }
    T *row = C + i * ldc;
    for (int64_t j = 0; j < N; ++j) {
      double v = static_cast<double>(alpha) * acc[j];
      if (beta != T(0)) v += static_cast<double>(beta) * static_cast<double>(row[j]);
      if (epilogue != Epilogue::None) v += static_cast<double>(bias[j]);
      if (epilogue == Epilogue::BiasRelu && v < 0.0) v = 0.0;
      row[j] = static_cast<T>(v);
    }
  }
}

#define EMBER_INSTANTIATE_GEMM(T)                                                                                  \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T *, int64_t, const T *, int64_t, T, T *,   \
                        int64_t, const T *, Epilogue);                                                              \
  template void gemm_group<T>(const GemmCall<T> *, int);                                                           \
  template void gemm_reference<T>(bool, bool, int64_t, int64_t, int64_t, T, const T *, int64_t, const T *, int64_t, \
                                  T, T *, int64_t, const T *, Epilogue);
EMBER_INSTANTIATE_GEMM(float)
EMBER_INSTANTIATE_GEMM(double)
#undef EMBER_INSTANTIATE_GEMM

}  // namespace cpu
}  // namespace ember::kernels
