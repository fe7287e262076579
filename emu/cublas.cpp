// The emulated cuBLAS: handles (stream, pointer mode, math mode) and GEMM (plain and strided-batched), validated by
// cuBLAS's argument rules and computed column-major on the handle's stream, accumulating in the requested compute type.
#include <cublas_v2.h>

#include <string>
#include <vector>

#include "emu/exec.h"
#include "emu/state.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
};

namespace emu::detail {

namespace {

struct Operand {
  const char* name;
  const void* data;
  int64_t rows, cols, ld;  // as stored, column-major
};

// A real GPU faults on an operand that leaves its allocation; so does the emulator, naming the operand.
void check_operand(const Operand& op, size_t element_bytes) {
  if (op.rows == 0 || op.cols == 0) return;
  const size_t bytes = static_cast<size_t>((op.cols - 1) * op.ld + op.rows) * element_bytes;
  Allocation a;
  const bool inside = find_allocation(op.data, &a) && a.kind != MemoryKind::Pinned &&
                      bytes <= a.bytes - static_cast<size_t>(static_cast<const char*>(op.data) - a.base);
  if (!inside)
    throw Violation(cudaErrorIllegalAddress, std::string("ember emulator: cuBLAS GEMM operand ") + op.name + " (" +
                                                 std::to_string(op.rows) + " x " + std::to_string(op.cols) +
                                                 ", ld " + std::to_string(op.ld) +
                                                 ") is not inside one device allocation");
}

// C = alpha op(A) op(B) + beta C, column-major; beta == 0 never reads C (BLAS semantics).
template <typename T, typename Acc>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc) {
  std::vector<Acc> column(static_cast<size_t>(m));
  for (int64_t j = 0; j < n; ++j) {
    std::fill(column.begin(), column.end(), Acc(0));
    for (int64_t l = 0; l < k; ++l) {
      const Acc b = static_cast<Acc>(tb ? B[j + l * ldb] : B[l + j * ldb]);
      if (!ta) {
        const T* a = A + l * lda;
        for (int64_t i = 0; i < m; ++i) column[static_cast<size_t>(i)] += static_cast<Acc>(a[i]) * b;
      } else {
        for (int64_t i = 0; i < m; ++i) column[static_cast<size_t>(i)] += static_cast<Acc>(A[l + i * lda]) * b;
      }
    }
    T* c = C + j * ldc;
    for (int64_t i = 0; i < m; ++i) {
      const T product = static_cast<T>(static_cast<Acc>(alpha) * column[static_cast<size_t>(i)]);
      c[i] = beta == T(0) ? product : static_cast<T>(product + beta * c[i]);
    }
  }
}

// The strides of a strided batch, in elements (a plain GEMM: one problem, strides unused).
struct Batch {
  int64_t count = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

template <typename T>
cublasStatus_t queue_gemm(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* alpha,
                          const void* A, int64_t lda, const void* B, int64_t ldb, const void* beta, void* C,
                          int64_t ldc, Batch batch = {}) {
  Stream* stream = stream_of(h->stream);
  if (stream == nullptr) return CUBLAS_STATUS_EXECUTION_FAILED;
  const bool on_device = h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
  const T host_alpha = on_device ? T(0) : *static_cast<const T*>(alpha);
  const T host_beta = on_device ? T(0) : *static_cast<const T*>(beta);
  enqueue(stream, Task{[=] {
            const T a = on_device ? *static_cast<const T*>(alpha) : host_alpha;
            const T b = on_device ? *static_cast<const T*>(beta) : host_beta;
            const bool reads_ab = k > 0 && a != T(0);
            for (int64_t i = 0; i < batch.count; ++i) {
              const T* Ai = static_cast<const T*>(A) + (reads_ab ? i * batch.stride_a : 0);
              const T* Bi = static_cast<const T*>(B) + (reads_ab ? i * batch.stride_b : 0);
              T* Ci = static_cast<T*>(C) + i * batch.stride_c;
              if (reads_ab) {
                check_operand(Operand{"A", Ai, ta ? k : m, ta ? m : k, lda}, sizeof(T));
                check_operand(Operand{"B", Bi, tb ? n : k, tb ? k : n, ldb}, sizeof(T));
              }
              check_operand(Operand{"C", Ci, m, n, ldc}, sizeof(T));
              gemm<T, T>(ta, tb, m, n, reads_ab ? k : 0, a, Ai, lda, Bi, ldb, b, Ci, ldc);
            }
          }});
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

}  // namespace emu::detail

using namespace emu::detail;

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (Stream* s = stream_of(handle->stream)) s->synchronize();
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream_of(stream) == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    default: return "cuBLAS error";
  }
}

namespace {

// cublasGemmEx_64 and its strided batch: cuBLAS's argument rules, then the product queued in the requested types.
cublasStatus_t gemm_call(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
                         int64_t n, int64_t k, const void* alpha, const void* A, cudaDataType Atype, int64_t lda,
                         const void* B, cudaDataType Btype, int64_t ldb, const void* beta, void* C, cudaDataType Ctype,
                         int64_t ldc, cublasComputeType_t compute, Batch batch) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  auto at_least = [](int64_t v) { return v < 1 ? int64_t{1} : v; };
  if (m < 0 || n < 0 || k < 0 || batch.count < 0 || alpha == nullptr || beta == nullptr ||
      lda < at_least(ta ? k : m) || ldb < at_least(tb ? n : k) || ldc < at_least(m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || batch.count == 0) return CUBLAS_STATUS_SUCCESS;
  const bool all_f32 = Atype == CUDA_R_32F && Btype == CUDA_R_32F && Ctype == CUDA_R_32F;
  const bool all_f64 = Atype == CUDA_R_64F && Btype == CUDA_R_64F && Ctype == CUDA_R_64F;
  if (all_f32 && (compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC ||
                  compute == CUBLAS_COMPUTE_32F_FAST_TF32))
    return queue_gemm<float>(handle, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, batch);
  if (all_f64 && compute == CUBLAS_COMPUTE_64F)
    return queue_gemm<double>(handle, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, batch);
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

}  // namespace

cublasStatus_t cublasGemmEx_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
                               int64_t n, int64_t k, const void* alpha, const void* A, cudaDataType Atype, int64_t lda,
                               const void* B, cudaDataType Btype, int64_t ldb, const void* beta, void* C,
                               cudaDataType Ctype, int64_t ldc, cublasComputeType_t compute, cublasGemmAlgo_t) {
  return gemm_call(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, compute,
                   Batch{});
}

cublasStatus_t cublasGemmStridedBatchedEx_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                             int64_t m, int64_t n, int64_t k, const void* alpha, const void* A,
                                             cudaDataType Atype, int64_t lda, long long strideA, const void* B,
                                             cudaDataType Btype, int64_t ldb, long long strideB, const void* beta,
                                             void* C, cudaDataType Ctype, int64_t ldc, long long strideC,
                                             int64_t batchCount, cublasComputeType_t compute, cublasGemmAlgo_t) {
  return gemm_call(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, compute,
                   Batch{batchCount, strideA, strideB, strideC});
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return cublasGemmEx_64(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                         compute, algo);
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                           const float* beta, float* C, int ldc) {
  return cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C,
                      CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const double* alpha, const double* A, int lda, const double* B, int ldb,
                           const double* beta, double* C, int ldc) {
  return cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_64F, lda, B, CUDA_R_64F, ldb, beta, C,
                      CUDA_R_64F, ldc, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT);
}
