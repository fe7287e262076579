// Host batched GEMM: every batch one cpu::gemm (OpenBLAS), chunks of batches run by the host thread pool; the shared
// argument checks; the test reference.
#include "kernels/bmm.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/cpu/parallel.h"
#include "kernels/linear.h"

namespace ember::kernels {

namespace detail {

void check_bmm_args(const char *name, bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K,
                    const void *A, int64_t lda, int64_t stride_a, const void *B, int64_t ldb, int64_t stride_b,
                    const void *C, int64_t ldc, int64_t stride_c) {
  EMBER_CHECK(batch >= 0, ValueError, name, ": batch must be non-negative, got ", batch);
  // An empty batch reads and writes nothing, so its pointers may be null (an empty tensor's), as with M or N == 0.
  const bool empty = batch == 0;
  check_gemm_args(name, trans_a, trans_b, empty ? 0 : M, empty ? 0 : N, K, A, lda, B, ldb, C, ldc, nullptr,
                  Epilogue::None);
  EMBER_CHECK(stride_a >= 0 && stride_b >= 0, ValueError, name, ": batch strides must be non-negative, got stride_a=",
              stride_a, " stride_b=", stride_b);
  // Two batches writing the same element would race on the GPU and depend on the order on the host.
  const int64_t c_extent = M == 0 || N == 0 ? 0 : (M - 1) * ldc + N;
  EMBER_CHECK(batch <= 1 || stride_c >= c_extent, ValueError, name, ": stride_c=", stride_c,
              " is smaller than one output matrix (", c_extent, " elements: M=", M, " rows of ldc=", ldc,
              "): the batches' outputs would overlap");
}

}  // namespace detail

namespace cpu {
namespace {

// Batches per pool task: enough work to outweigh a task's cost (as gemm's tiles), a function of the sizes only.
int64_t batches_per_task(int64_t M, int64_t N, int64_t K) {
  const double flops = std::max(2.0 * double(M) * double(N) * double(K), 1.0);
  return std::max<int64_t>(1, static_cast<int64_t>(kGemmMinTileFlops / flops));
}

}  // namespace

template <typename T>
void bmm(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda,
         int64_t stride_a, const T *B, int64_t ldb, int64_t stride_b, T beta, T *C, int64_t ldc, int64_t stride_c) {
  detail::check_bmm_args("cpu::bmm", trans_a, trans_b, batch, M, N, K, A, lda, stride_a, B, ldb, stride_b, C, ldc,
                         stride_c);
  if (batch == 0 || M == 0 || N == 0) return;
  auto one = [&](int64_t b) {
    // K == 0 or alpha == 0 reads neither operand: no pointer arithmetic on what may be null.
    const bool reads = K > 0 && alpha != T(0);
    gemm<T>(trans_a, trans_b, M, N, K, alpha, reads ? A + b * stride_a : A, lda, reads ? B + b * stride_b : B, ldb,
            beta, C + b * stride_c, ldc, nullptr, Epilogue::None);
  };
  // One batch: gemm cuts it into tiles for the pool. More: each task runs whole batches, and gemm called inside a
  // task runs its tiles on that thread alone (parallel.h), so every batch gets gemm's bits either way.
  if (batch == 1) {
    one(0);
    return;
  }
  const int64_t per_task = batches_per_task(M, N, K);
  parallel_chunks(
      batch, per_task,
      [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) one(b);
      },
      "bmm");
}

template <typename T>
void bmm_reference(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha, const T *A,
                   int64_t lda, int64_t stride_a, const T *B, int64_t ldb, int64_t stride_b, T beta, T *C, int64_t ldc,
                   int64_t stride_c) {
  detail::check_bmm_args("cpu::bmm_reference", trans_a, trans_b, batch, M, N, K, A, lda, stride_a, B, ldb, stride_b,
                         C, ldc, stride_c);
  if (M == 0 || N == 0) return;
  const bool reads = K > 0 && alpha != T(0);
  for (int64_t b = 0; b < batch; ++b)
    gemm_reference<T>(trans_a, trans_b, M, N, K, alpha, reads ? A + b * stride_a : A, lda,
                      reads ? B + b * stride_b : B, ldb, beta, C + b * stride_c, ldc, nullptr, Epilogue::None);
}

#define EMBER_INSTANTIATE_BMM(T)                                                                                    \
  template void bmm<T>(bool, bool, int64_t, int64_t, int64_t, int64_t, T, const T *, int64_t, int64_t, const T *,   \
                       int64_t, int64_t, T, T *, int64_t, int64_t);                                                 \
  template void bmm_reference<T>(bool, bool, int64_t, int64_t, int64_t, int64_t, T, const T *, int64_t, int64_t,    \
                                 const T *, int64_t, int64_t, T, T *, int64_t, int64_t);
EMBER_INSTANTIATE_BMM(float)
EMBER_INSTANTIATE_BMM(double)
#undef EMBER_INSTANTIATE_BMM

}  // namespace cpu
}  // namespace ember::kernels
