// CUDA batched GEMMs: ember's hand-written tiled kernel (linear.cu's, with blockIdx.z walking the batch) and cuBLAS's
// strided-batched GEMM in true FP32/FP64 (no TF32), the reference it is measured against.
#include "kernels/bmm.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/tiled_gemm.h"
#include "kernels/linear.h"

namespace ember::kernels::cuda {

template <typename T>
void bmm(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda,
         int64_t stride_a, const T *B, int64_t ldb, int64_t stride_b, T beta, T *C, int64_t ldc, int64_t stride_c,
         Stream stream) {
  detail::check_bmm_args("cuda::bmm", trans_a, trans_b, batch, M, N, K, A, lda, stride_a, B, ldb, stride_b, C, ldc,
                         stride_c);
  tiled_gemm<T>(trans_a, trans_b, batch, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc, stride_c,
                nullptr, Epilogue::None, stream);
}

template <typename T>
void bmm_cublas(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha, const T *A,
                int64_t lda, int64_t stride_a, const T *B, int64_t ldb, int64_t stride_b, T beta, T *C, int64_t ldc,
                int64_t stride_c, Stream stream) {
  detail::check_bmm_args("cuda::bmm_cublas", trans_a, trans_b, batch, M, N, K, A, lda, stride_a, B, ldb, stride_b, C,
                         ldc, stride_c);
  if (batch == 0 || M == 0 || N == 0) return;
  if (K == 0 || alpha == T(0)) {
    // Nothing to multiply (and A, B must not be read): C = beta * C is no GEMM, and ember's kernel does exactly that
    // for K == 0, rather than relying on how cuBLAS treats a degenerate product (as gemm_cublas does).
    tiled_gemm<T>(trans_a, trans_b, batch, M, N, 0, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, stride_c, nullptr,
                  Epilogue::None, stream);
    return;
  }
  constexpr bool kIsFloat = std::is_same_v<T, float>;
  constexpr cudaDataType kType = kIsFloat ? CUDA_R_32F : CUDA_R_64F;
  // The default (not _FAST_*) compute types keep full single/double precision through the whole product.
  constexpr cublasComputeType_t kCompute = kIsFloat ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F;
  CublasLease cublas(stream);
  // Column-major cuBLAS computes each row-major C_b as C_b^T = op(B_b)^T op(A_b)^T: B first with its own flag (see
  // gemm_cublas); the strides are the same either way.
  CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(cublas.handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                             trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, kType, ldb,
                                             stride_b, A, kType, lda, stride_a, &beta, C, kType, ldc, stride_c, batch,
                                             kCompute, CUBLAS_GEMM_DEFAULT));
}

#define EMBER_INSTANTIATE_BMM(T)                                                                                      \
  template void bmm<T>(bool, bool, int64_t, int64_t, int64_t, int64_t, T, const T *, int64_t, int64_t, const T *,     \
                       int64_t, int64_t, T, T *, int64_t, int64_t, Stream);                                           \
  template void bmm_cublas<T>(bool, bool, int64_t, int64_t, int64_t, int64_t, T, const T *, int64_t, int64_t,         \
                              const T *, int64_t, int64_t, T, T *, int64_t, int64_t, Stream);
EMBER_INSTANTIATE_BMM(float)
EMBER_INSTANTIATE_BMM(double)
#undef EMBER_INSTANTIATE_BMM

}  // namespace ember::kernels::cuda
