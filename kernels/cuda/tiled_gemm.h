// What kernels/cuda/linear.cu shares with bmm.cu (defined in linear.cu): ember's hand-written tiled GEMM over a
// strided batch of problems, and the per-device cuBLAS handles with their status check.
#pragma once

#include <cublas_v2.h>

#include <cstdint>
#include <mutex>

#include "base/error.h"
#include "kernels/linear.h"

// Every cuBLAS call goes through this: a failed status becomes a CudaError naming the call and the status.
#define CUBLAS_CHECK(expr)                                                                                        \
  do {                                                                                                            \
    cublasStatus_t ember_cublas_status_ = (expr);                                                                 \
    if (ember_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                            \
      throw ::ember::CudaError(::ember::detail::concat("cuBLAS error at ", __FILE__, ":", __LINE__, ": ", #expr,   \
                                                       " returned ", cublasGetStatusName(ember_cublas_status_), " (", \
                                                       cublasGetStatusString(ember_cublas_status_), ")"));        \
  } while (0)

namespace ember::kernels::cuda {

// For every b < batch: C_b = act(alpha * op(A_b) op(B_b) + beta * C_b + bias), X_b = X + b * stride_x, with
// blockIdx.z walking the batch (several launches past gridDim.z's limit). The caller has checked the arguments
// (detail::check_gemm_args / check_bmm_args); cuda::gemm is the batch of one.
template <typename T>
void tiled_gemm(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha, const T *A,
                int64_t lda, int64_t stride_a, const T *B, int64_t ldb, int64_t stride_b, T beta, T *C, int64_t ldc,
                int64_t stride_c, const T *bias, Epilogue epilogue, Stream stream);

// The calling device's cached cuBLAS handle (FP32 without TF32, host pointer mode), bound to `stream` and held for
// as long as this object lives: cublasSetStream changes the handle for every thread that shares it, so the lock
// covers set-stream and the calls that follow; they only queue work, so it is held for microseconds.
class CublasLease {
 public:
  explicit CublasLease(Stream stream);
  cublasHandle_t handle() const { return handle_; }

 private:
  std::unique_lock<std::mutex> lock_;
  cublasHandle_t handle_ = nullptr;
};

}  // namespace ember::kernels::cuda
