// GEMM for the layouts a Linear layer needs, row-major throughout:
//   C(M, N) = act(alpha * op(A) * op(B) + beta * C + bias)
// op(A) is (M, K): A is stored (M, K) with leading dimension lda, or (K, M) when trans_a.
// op(B) is (K, N): B is stored (K, N) with ldb, or (N, K) when trans_b.
// bias (N) is broadcast over rows (Epilogue::Bias / BiasRelu; ignored for None); act is ReLU for
// BiasRelu. beta == 0 means C is not read (it may hold NaN).
// Linear forward y = x W^T + b: gemm(false, true, B, out, in, 1, x, in, W, in, 0, y, out, b, BiasRelu)
// dW += dy^T x: gemm(true, false, out, in, B, 1, dy, out, x, in, 1, dW, in) ; dx = dy W: gemm(false, false, ...)
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common.h"

namespace ember::kernels {

enum class Epilogue : uint8_t { None, Bias, BiasRelu };

#define EMBER_GEMM_ARGS                                                                                   \
  bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda, const T *B, \
      int64_t ldb, T beta, T *C, int64_t ldc, const T *bias, Epilogue epilogue

namespace cpu {
// The BLAS the CPU GEMM calls: OpenBLAS's build string (version, kernels, thread limit), and the threads it runs
// inside one GEMM tile (1: the pool's tiles are the parallelism).
std::string blas_config();
int blas_threads();

// C cut into tiles (gemm_tiles), each one single-threaded OpenBLAS call (cblas_sgemm / cblas_dgemm) followed by the
// epilogue on the tile while it is in cache; the host thread pool runs the tiles. The tiles depend on M, N and K only,
// so C is bitwise the same at any thread count.
template <typename T> void gemm(EMBER_GEMM_ARGS);

// How gemm cuts C: `count` tiles of `step` rows (split_rows) or columns, the last one shorter.
struct GemmTiles {
  bool split_rows;
  int64_t count, step;
};
inline constexpr double kGemmMinTileFlops = 1e6;  // below this a tile's call overhead outweighs the parallelism
inline constexpr int64_t kGemmMaxTiles = 2;       // each extra cut costs work (OpenBLAS packs the operands again)
inline constexpr int64_t kGemmTileAlign = 16;     // tile edges: a multiple of the AVX-512 micro-kernel's width
GemmTiles gemm_tiles(int64_t M, int64_t N, int64_t K);

// One GEMM's arguments, as gemm takes them.
template <typename T>
struct GemmCall {
  bool trans_a, trans_b;
  int64_t M, N, K;
  T alpha;
  const T *A;
  int64_t lda;
  const T *B;
  int64_t ldb;
  T beta;
  T *C;
  int64_t ldc;
  const T *bias = nullptr;
  Epilogue epilogue = Epilogue::None;
};
// Independent GEMMs (no call's C overlaps another call's A, B or C) in one pool region: each call keeps the
// tiles gemm would cut it into, so every C gets exactly gemm's bits, and the threads claim the tiles of all
// calls together. A layer's dW and dX this way cost one wait for the slower thread instead of two.
template <typename T> void gemm_group(const GemmCall<T> *calls, int count);

// A plain triple loop with a double accumulator: the reference the tests compare against.
template <typename T> void gemm_reference(EMBER_GEMM_ARGS);
}  // namespace cpu

namespace cuda {
// ember's hand-written tiled kernel (shared-memory tiles, register blocking, 16-byte loads).
template <typename T> void gemm(EMBER_GEMM_ARGS, Stream stream);
// cuBLAS (FP32 without TF32) with the same epilogue: the reference and a selectable backend.
template <typename T> void gemm_cublas(EMBER_GEMM_ARGS, Stream stream);
// Destroys the cached cuBLAS handles (they are created again on next use); for leak checks at exit.
void release_cublas_handles();
}  // namespace cuda

namespace detail {
// The argument rules all three GEMMs share (sizes, leading dimensions, pointers), so they reject
// exactly the same inputs with the same ValueError. Defined in kernels/cpu/gemm.cpp.
void check_gemm_args(const char* name, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const void* A,
                     int64_t lda, const void* B, int64_t ldb, const void* C, int64_t ldc, const void* bias,
                     Epilogue epilogue);
}  // namespace detail

#undef EMBER_GEMM_ARGS

}  // namespace ember::kernels
