// Strided-batched GEMM, row-major throughout: for every b in [0, batch)
//   C_b(M, N) = alpha * op(A_b) * op(B_b) + beta * C_b,  A_b = A + b * stride_a, B_b = B + b * stride_b,
//   C_b = C + b * stride_c,
// with op, lda, ldb, ldc as in kernels/linear.h's gemm (A stored (M, K), or (K, M) when trans_a; B stored (K, N), or
// (N, K) when trans_b). beta == 0 means C is not read (it may hold NaN). stride_a or stride_b may be 0 (one matrix
// for every batch); stride_c must keep the batches' outputs apart. Attention's scores are
// bmm(false, true, B * heads, T, T, D, scale, Q, D, T * D, K, D, T * D, 0, S, T, T * T).
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

#define EMBER_BMM_ARGS                                                                                           \
  bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda, \
      int64_t stride_a, const T *B, int64_t ldb, int64_t stride_b, T beta, T *C, int64_t ldc, int64_t stride_c

namespace cpu {
// Every batch is exactly cpu::gemm on its matrices (OpenBLAS, single-threaded per call), so C is bitwise the same
// at any thread count; the host pool runs chunks of batches (one batch: gemm's own tiles).
template <typename T> void bmm(EMBER_BMM_ARGS);
// gemm_reference per batch (double accumulator): what the tests compare against.
template <typename T> void bmm_reference(EMBER_BMM_ARGS);
}  // namespace cpu

namespace cuda {
// ember's hand-written tiled GEMM (kernels/cuda/linear.cu's kernel) with blockIdx.z walking the batch.
template <typename T> void bmm(EMBER_BMM_ARGS, Stream stream);
// cuBLAS's cublasGemmStridedBatchedEx in true FP32/FP64 (no TF32): the reference and a selectable backend.
template <typename T> void bmm_cublas(EMBER_BMM_ARGS, Stream stream);
}  // namespace cuda

namespace detail {
// The argument rules the three batched GEMMs share: gemm's per matrix, plus the batch and its strides.
// Defined in kernels/cpu/bmm.cpp.
void check_bmm_args(const char *name, bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K,
                    const void *A, int64_t lda, int64_t stride_a, const void *B, int64_t ldb, int64_t stride_b,
                    const void *C, int64_t ldc, int64_t stride_c);
}  // namespace detail

#undef EMBER_BMM_ARGS

}  // namespace ember::kernels
