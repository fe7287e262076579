// cuBLAS GEMM in true FP32/FP64 (no TF32) with ember's bias/ReLU epilogue: the reference the hand-written kernel meets.
#include "kernels/gemm.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"

// Every cuBLAS call goes through this: a failed status becomes a CudaError naming the call and the status.
#define CUBLAS_CHECK(expr)                                                                                        \
  do {                                                                                                            \
    cublasStatus_t ember_cublas_status_ = (expr);                                                                 \
    if (ember_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                            \
      throw ::ember::CudaError(::ember::detail::concat("cuBLAS error at ", __FILE__, ":", __LINE__, ": ", #expr,   \
                                                       " returned ", cublasGetStatusName(ember_cublas_status_), " (", \
                                                       cublasGetStatusString(ember_cublas_status_), ")"));        \
  } while (0)

namespace ember::kernels {

namespace cuda {
namespace {

// C(M, N) = act(scale(C) + bias), bias broadcast over rows and optional; scale(C) is beta * C when `scale_c` (with
// beta == 0 writing zeros, never 0 * NaN), else C. Grid-stride so any M * N is covered.
template <typename T>
__global__ void epilogue_kernel(int64_t M, int64_t N, T *__restrict__ C, int64_t ldc, bool scale_c, T beta,
                                const T *__restrict__ bias, bool relu) {
  const int64_t total = M * N;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t row = idx / N, col = idx - row * N;
    T v = C[row * ldc + col];
    if (scale_c) v = beta == T(0) ? T(0) : beta * v;
    if (bias != nullptr) v += bias[col];
    if (relu) v = v < T(0) ? T(0) : v;  // lets NaN through, like the CPU twin
    C[row * ldc + col] = v;
  }
}

template <typename T>
void launch_epilogue(int64_t M, int64_t N, T *C, int64_t ldc, bool scale_c, T beta, const T *bias, bool relu,
                     Stream stream) {
  constexpr int kThreads = 256;
  epilogue_kernel<T><<<grid_for(M * N, kThreads), kThreads, 0, stream>>>(M, N, C, ldc, scale_c, beta, bias, relu);
  EMBER_LAUNCH_CHECK("epilogue_kernel");
}

// One cuBLAS handle per device. cublasSetStream changes the handle for every thread that shares it, so the mutex
// covers set-stream + GEMM together; the GEMM only queues work, so the lock is held for microseconds.
struct DeviceHandle {
  std::mutex mutex;
  cublasHandle_t handle = nullptr;
};

// Created on first use and never destroyed: cublasDestroy in a static destructor can run after the CUDA runtime
// has torn down its context at exit. A failed cublasCreate throws and leaves the slot empty for a later retry.
std::mutex table_mutex;
std::vector<std::unique_ptr<DeviceHandle>> &handle_table() {
  static auto *table = new std::vector<std::unique_ptr<DeviceHandle>>();  // outlives static destructors
  return *table;
}

DeviceHandle &handle_for(int device) {
  std::lock_guard<std::mutex> lock(table_mutex);
  auto &table = handle_table();
  if (table.size() <= static_cast<size_t>(device)) table.resize(static_cast<size_t>(device) + 1);
  std::unique_ptr<DeviceHandle> &slot = table[static_cast<size_t>(device)];
  if (!slot) {
    auto fresh = std::make_unique<DeviceHandle>();
    CUBLAS_CHECK(cublasCreate(&fresh->handle));
    // FP32 stays FP32: TF32 tensor cores are used only under CUBLAS_TF32_TENSOR_OP_MATH or a *_FAST_TF32 compute
    // type, and neither is ever set here (NVIDIA_TF32_OVERRIDE can only switch TF32 off, never on).
    CUBLAS_CHECK(cublasSetMathMode(fresh->handle, CUBLAS_DEFAULT_MATH));
    CUBLAS_CHECK(cublasSetPointerMode(fresh->handle, CUBLAS_POINTER_MODE_HOST));  // alpha, beta are host values
    slot = std::move(fresh);
  }
  return *slot;
}

}  // namespace

void release_cublas_handles() {
  std::lock_guard<std::mutex> lock(table_mutex);
  for (auto &slot : handle_table()) {
    if (!slot) continue;
    std::lock_guard<std::mutex> handle_lock(slot->mutex);
    cublasDestroy(slot->handle);
    slot.reset();
  }
}

template <typename T>
void gemm_cublas(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda,
                 const T *B, int64_t ldb, T beta, T *C, int64_t ldc, const T *bias, Epilogue epilogue, Stream stream) {
  detail::check_gemm_args("cuda::gemm_cublas", trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, bias, epilogue);
  if (M == 0 || N == 0) return;

  constexpr bool kIsFloat = std::is_same_v<T, float>;
  constexpr cudaDataType kType = kIsFloat ? CUDA_R_32F : CUDA_R_64F;
  // The default (not _FAST_*) compute types keep full single/double precision through the whole product.
  constexpr cublasComputeType_t kCompute = kIsFloat ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F;

  const bool relu = epilogue == Epilogue::BiasRelu;
  if (epilogue == Epilogue::None) bias = nullptr;
  if (K == 0 || alpha == T(0)) {
    // Nothing to multiply (and A, B must not be read): C = beta * C + bias in one pass of our own, rather than
    // relying on how cuBLAS treats a degenerate product.
    if (beta != T(1) || bias != nullptr) launch_epilogue(M, N, C, ldc, /*scale_c=*/true, beta, bias, relu, stream);
    return;
  }

  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  DeviceHandle &h = handle_for(device);
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    CUBLAS_CHECK(cublasSetStream(h.handle, stream));
    // cuBLAS is column-major; a row-major (M, N) C is a column-major (N, M) C^T, and C^T = op(B)^T op(A)^T.
    // A row-major stored B read column-major is already B^T, so B goes first with its own flag, then A.
    CUBLAS_CHECK(cublasGemmEx_64(h.handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N,
                                 M, K, &alpha, B, kType, ldb, A, kType, lda, &beta, C, kType, ldc, kCompute,
                                 CUBLAS_GEMM_DEFAULT));
  }
  if (bias != nullptr) launch_epilogue(M, N, C, ldc, /*scale_c=*/false, beta, bias, relu, stream);
}

template void gemm_cublas<float>(bool, bool, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *,
                                 int64_t, float, float *, int64_t, const float *, Epilogue, Stream);
template void gemm_cublas<double>(bool, bool, int64_t, int64_t, int64_t, double, const double *, int64_t,
                                  const double *, int64_t, double, double *, int64_t, const double *, Epilogue, Stream);

}  // namespace cuda
}  // namespace ember::kernels
