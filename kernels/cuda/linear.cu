// CUDA GEMMs: ember's hand-written kernel (shared-memory tiles, register micro-tiles, 16-byte loads, fused
// bias/ReLU epilogue) and, after it, cuBLAS in true FP32/FP64 (no TF32) with the same epilogue: the reference
// the hand-written kernel is measured against and a selectable backend.
#include "kernels/linear.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/tiled_gemm.h"

namespace ember::kernels {

namespace cuda {
namespace {

// A block computes a BM x BN tile of C, stepping through K in slices of BK; each thread owns TM x TN outputs,
// held as (TM/4) x (TN/4) groups of 4x4 so fragments come out of shared memory as 16-byte vectors.
template <int BM_, int BN_, int BK_, int TM_, int TN_, int kMinBlocks_>
struct Tiling {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_;
  static constexpr int kMinBlocks = kMinBlocks_;  // resident blocks per SM asked of ptxas (caps registers)
  static constexpr int kThreadsM = BM / TM, kThreadsN = BN / TN;
  static constexpr int kThreads = kThreadsM * kThreadsN;
  // Rows of the smem tiles are padded by 4 elements: it breaks the 2-way bank conflict of the transposing
  // stores and keeps every row 16-byte aligned for the vector fragment reads.
  static constexpr int kPad = 4;
  static constexpr int kLoadsA = BM * BK / (4 * kThreads);  // 4-element groups each thread loads per slice
  static constexpr int kLoadsB = BN * BK / (4 * kThreads);
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "micro tiles and slices come in groups of 4");
  static_assert(kLoadsA >= 1 && kLoadsB >= 1 && kLoadsA * 4 * kThreads == BM * BK && kLoadsB * 4 * kThreads == BN * BK,
                "every thread loads the same whole number of 4-element groups");
};

// Large problems: 8x8 outputs per thread is 64 FMAs per 4 vector smem reads per k. Two resident blocks per SM
// (16 warps) hold the registers to <= 128 per thread; unconstrained, ptxas picks 130 and only one block fits.
using LargeTiling = Tiling<128, 128, 8, 8, 8, 2>;  // 256 threads
// Mid-sized problems, where 128x128 tiles would leave SMs idle; also the large double kernel.
using MediumTiling = Tiling<64, 64, 16, 4, 4, 2>;  // 256 threads
// Small outputs (the MLP's 128 x 256, 128 x 10): more, smaller blocks, a long K slice to amortise the syncs.
using SmallTiling = Tiling<32, 32, 32, 4, 4, 1>;   // 64 threads

template <typename T>
__device__ __forceinline__ void smem_read4(const T *p, T *out) {
  if constexpr (std::is_same_v<T, float>) {
    const float4 v = *reinterpret_cast<const float4 *>(p);
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else {
    const double2 lo = reinterpret_cast<const double2 *>(p)[0], hi = reinterpret_cast<const double2 *>(p)[1];
    out[0] = lo.x, out[1] = lo.y, out[2] = hi.x, out[3] = hi.y;
  }
}

// Four consecutive elements of row `row` of a stored (rows, cols) matrix starting at column `col`, zero outside it.
// kVec: the caller checked base and ld keep every 4th element 16-byte aligned (float only).
template <typename T>
__device__ __forceinline__ void smem_write4(T *p, const T *in) {
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float4 *>(p) = make_float4(in[0], in[1], in[2], in[3]);
  } else {
    reinterpret_cast<double2 *>(p)[0] = make_double2(in[0], in[1]);
    reinterpret_cast<double2 *>(p)[1] = make_double2(in[2], in[3]);
  }
}

template <typename T, bool kVec>
__device__ __forceinline__ void global_read4(const T *__restrict__ base, int64_t ld, int64_t row, int64_t col,
                                             int64_t rows, int64_t cols, T *out) {
  if (row >= rows) {
    out[0] = out[1] = out[2] = out[3] = T(0);
    return;
  }
  const T *p = base + row * ld;
  if constexpr (kVec) {
    static_assert(std::is_same_v<T, float>, "16-byte loads are for float");
    if (col + 3 < cols) {
      const float4 v = __ldg(reinterpret_cast<const float4 *>(p + col));
      out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = col + j < cols ? __ldg(p + col + j) : T(0);
}

// One operand's BK-slice, gathered into registers. The tile in smem is always [BK][BMN + pad] (k-major), so the
// inner loop reads op(A) columns / op(B) rows contiguously whatever the stored layout.
// kKContig: the operand is stored with K contiguous (A not transposed, B transposed), i.e. as (MN, K).
template <typename T, int BMN, int BK, int kThreads, int kLoads, bool kKContig, bool kVec>
__device__ __forceinline__ void load_slice(const T *__restrict__ src, int64_t ld, int64_t mn0, int64_t k0, int64_t MN,
                                           int64_t K, int tid, T (&regs)[kLoads][4]) {
#pragma unroll
  for (int l = 0; l < kLoads; ++l) {
    const int f = tid + l * kThreads;
    if constexpr (kKContig) {
      const int r = f / (BK / 4), c = (f % (BK / 4)) * 4;
      global_read4<T, kVec>(src, ld, mn0 + r, k0 + c, MN, K, regs[l]);
    } else {
      const int r = f / (BMN / 4), c = (f % (BMN / 4)) * 4;
      global_read4<T, kVec>(src, ld, k0 + r, mn0 + c, K, MN, regs[l]);
    }
  }
}

template <typename T, int BMN, int BK, int kPad, int kThreads, int kLoads, bool kKContig>
__device__ __forceinline__ void store_slice(T (*tile)[BMN + kPad], int tid, const T (&regs)[kLoads][4]) {
#pragma unroll
  for (int l = 0; l < kLoads; ++l) {
    const int f = tid + l * kThreads;
    if constexpr (kKContig) {  // transpose on the way in: (mn, k..k+3) -> tile[k..k+3][mn]
      const int r = f / (BK / 4), c = (f % (BK / 4)) * 4;
#pragma unroll
      for (int j = 0; j < 4; ++j) tile[c + j][r] = regs[l][j];
    } else {
      const int r = f / (BMN / 4), c = (f % (BMN / 4)) * 4;
      smem_write4(&tile[r][c], regs[l]);
    }
  }
}

// acc += op(A) op(B) over one BK-slice held in shared memory: each thread's TM x TN outputs.
template <typename T, typename Cfg>
__device__ __forceinline__ void multiply_slice(const T (*As)[Cfg::BM + Cfg::kPad], const T (*Bs)[Cfg::BN + Cfg::kPad],
                                               int tx, int ty, T (&acc)[Cfg::TM][Cfg::TN]) {
#pragma unroll
  for (int k = 0; k < Cfg::BK; ++k) {
    T a[Cfg::TM], b[Cfg::TN];
#pragma unroll
    for (int g = 0; g < Cfg::TM / 4; ++g) smem_read4(&As[k][g * Cfg::kThreadsM * 4 + ty * 4], a + g * 4);
#pragma unroll
    for (int g = 0; g < Cfg::TN / 4; ++g) smem_read4(&Bs[k][g * Cfg::kThreadsN * 4 + tx * 4], b + g * 4);
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
  }
}

// One output of the epilogue: v (alpha times the product) + beta * old (C's value, read only when beta != 0: with
// beta == 0, C may hold NaN) + the column's bias, then the ReLU, written `v < 0 ? 0 : v` so NaN passes, as on the CPU.
template <typename T>
__device__ __forceinline__ T epilogue(T v, T beta, T old, const T *__restrict__ bias, int64_t col, bool relu) {
  if (beta != T(0)) v += beta * old;
  if (bias != nullptr) v += bias[col];
  return relu ? (v < T(0) ? T(0) : v) : v;
}

// Four outputs of a row of C from column `col` (those < N): one 16-byte access each way when c_vec allows it.
template <typename T>
__device__ __forceinline__ void store4(T *__restrict__ crow, int64_t col, int64_t N, const T (&v)[4], T beta,
                                       const T *__restrict__ bias, bool relu, bool c_vec) {
  if constexpr (std::is_same_v<T, float>) {
    if (c_vec && col + 3 < N) {
      float4 *cp = reinterpret_cast<float4 *>(crow + col);
      const float4 old = beta != 0.0f ? *cp : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      *cp = make_float4(epilogue(v[0], beta, old.x, bias, col, relu), epilogue(v[1], beta, old.y, bias, col + 1, relu),
                        epilogue(v[2], beta, old.z, bias, col + 2, relu), epilogue(v[3], beta, old.w, bias, col + 3, relu));
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (col + j >= N) break;
    crow[col + j] = epilogue(v[j], beta, beta != T(0) ? crow[col + j] : T(0), bias, col + j, relu);
  }
}

// C(M, N) = act(alpha * op(A) op(B) + beta * C + bias), one BM x BN tile per block (blockIdx.x = tile_m * tiles_n
// + tile_n, so consecutive blocks share a row panel of A in L2); blockIdx.z picks the problem of a strided batch
// (cuda::bmm; a plain GEMM is a batch of one). Out-of-range rows/columns of A and B are loaded as
// zeros, so the inner loop needs no bounds checks; only the final stores are checked.
// Double-buffered: the next slice is fetched from global memory into registers while the current one is multiplied,
// then written to the other smem buffer, so each slice costs one __syncthreads.
template <typename T, typename Cfg, bool kTransA, bool kTransB, bool kVec>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) gemm_kernel(int64_t M, int64_t N, int64_t K, T alpha,
                                                             const T *__restrict__ A, int64_t lda,
                                                             const T *__restrict__ B, int64_t ldb, T beta,
                                                             T *__restrict__ C, int64_t ldc, const T *__restrict__ bias,
                                                             bool relu, bool c_vec, int64_t tiles_n,
                                                             int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN, kPad = Cfg::kPad;
  constexpr int kThreads = Cfg::kThreads, kLoadsA = Cfg::kLoadsA, kLoadsB = Cfg::kLoadsB;
  __shared__ __align__(16) T As[2][BK][BM + kPad];
  __shared__ __align__(16) T Bs[2][BK][BN + kPad];

  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % Cfg::kThreadsN, ty = tid / Cfg::kThreadsN;
  const int64_t m0 = (blockIdx.x / tiles_n) * BM, n0 = (blockIdx.x % tiles_n) * BN;
  const auto z = static_cast<int64_t>(blockIdx.z);
  A += z * stride_a;
  B += z * stride_b;
  C += z * stride_c;

  T ra[kLoadsA][4], rb[kLoadsB][4];
  T acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = T(0);

  const int64_t slices = (K + BK - 1) / BK;
  for (int64_t s = 0; s <= slices; ++s) {
    // Slice s into registers (s == 0: into buffer 0 at once), slice s - 1 multiplied meanwhile.
    const int cur = static_cast<int>((s - 1) & 1);
    if (s < slices) {
      load_slice<T, BM, BK, kThreads, kLoadsA, !kTransA, kVec>(A, lda, m0, s * BK, M, K, tid, ra);
      load_slice<T, BN, BK, kThreads, kLoadsB, kTransB, kVec>(B, ldb, n0, s * BK, N, K, tid, rb);
    }
    if (s > 0) multiply_slice<T, Cfg>(As[cur], Bs[cur], tx, ty, acc);
    if (s < slices) {
      // Nobody reads buffer s & 1 now: every thread passed the previous iteration's barrier after its last use.
      store_slice<T, BM, BK, kPad, kThreads, kLoadsA, !kTransA>(As[s & 1], tid, ra);
      store_slice<T, BN, BK, kPad, kThreads, kLoadsB, kTransB>(Bs[s & 1], tid, rb);
    }
    __syncthreads();
  }

#pragma unroll
  for (int gi = 0; gi < TM / 4; ++gi)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = m0 + gi * Cfg::kThreadsM * 4 + ty * 4 + i;
      if (row >= M) continue;
#pragma unroll
      for (int gj = 0; gj < TN / 4; ++gj) {
        T v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = alpha * acc[gi * 4 + i][gj * 4 + j];
        store4(C + row * ldc, n0 + gj * Cfg::kThreadsN * 4 + tx * 4, N, v, beta, bias, relu, c_vec);
      }
    }
}

// The batch of problems a launch walks with blockIdx.z.
struct Batch {
  int64_t count, stride_a, stride_b, stride_c;
};
constexpr int64_t kMaxGridZ = 65535;

template <typename T, typename Cfg, bool kTransA, bool kTransB, bool kVec>
void launch(int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda, const T *B, int64_t ldb, T beta, T *C,
            int64_t ldc, const T *bias, bool relu, bool c_vec, Batch batch, Stream stream) {
  const int64_t tiles_m = (M + Cfg::BM - 1) / Cfg::BM, tiles_n = (N + Cfg::BN - 1) / Cfg::BN;
  EMBER_CHECK(tiles_m <= INT_MAX / tiles_n, ValueError, "cuda::gemm: a ", M, "x", N, " output needs ", tiles_m, "x",
              tiles_n, " tiles, more than one launch can hold");
  // gridDim.z stops at 65535: a longer batch takes several launches.
  for (int64_t first = 0; first < batch.count; first += kMaxGridZ) {
    const dim3 grid(static_cast<unsigned>(tiles_m * tiles_n), 1,
                    static_cast<unsigned>(std::min(kMaxGridZ, batch.count - first)));
    launch_kernel<gemm_kernel<T, Cfg, kTransA, kTransB, kVec>>(
        grid, Cfg::kThreads, 0, stream, M, N, K, alpha, A + first * batch.stride_a, lda, B + first * batch.stride_b,
        ldb, beta, C + first * batch.stride_c, ldc, bias, relu, c_vec, tiles_n, batch.stride_a, batch.stride_b,
        batch.stride_c);
    EMBER_LAUNCH_CHECK("gemm_kernel");
  }
}

// Turns the runtime flags into template parameters: the four layouts and, for float, the 16-byte-load variant.
template <typename T, typename Cfg>
void dispatch(bool trans_a, bool trans_b, bool vec, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda,
              const T *B, int64_t ldb, T beta, T *C, int64_t ldc, const T *bias, bool relu, bool c_vec, Batch batch,
              Stream stream) {
#define EMBER_GEMM_LAUNCH(TA, TB, VEC) \
  launch<T, Cfg, TA, TB, VEC>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, relu, c_vec, batch, stream)
  if constexpr (std::is_same_v<T, float>) {
    if (vec) {
      if (trans_a) {
        trans_b ? EMBER_GEMM_LAUNCH(true, true, true) : EMBER_GEMM_LAUNCH(true, false, true);
      } else {
        trans_b ? EMBER_GEMM_LAUNCH(false, true, true) : EMBER_GEMM_LAUNCH(false, false, true);
      }
      return;
    }
  }
  if (trans_a) {
    trans_b ? EMBER_GEMM_LAUNCH(true, true, false) : EMBER_GEMM_LAUNCH(true, false, false);
  } else {
    trans_b ? EMBER_GEMM_LAUNCH(false, true, false) : EMBER_GEMM_LAUNCH(false, false, false);
  }
#undef EMBER_GEMM_LAUNCH
}

inline bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

template <typename T>
void tiled_gemm(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha, const T *A,
                int64_t lda, int64_t stride_a, const T *B, int64_t ldb, int64_t stride_b, T beta, T *C, int64_t ldc,
                int64_t stride_c, const T *bias, Epilogue epilogue, Stream stream) {
  if (batch == 0 || M == 0 || N == 0) return;
  // alpha == 0 skips the product (BLAS semantics: A and B are not read), leaving beta * C + bias.
  if (alpha == T(0)) K = 0;
  if (K == 0) stride_a = stride_b = 0;  // A and B may be null then: no offsets on them
  if (epilogue == Epilogue::None) bias = nullptr;
  const bool relu = epilogue == Epilogue::BiasRelu;

  // float4 loads need every 4th element of each stored row 16-byte aligned: an aligned base and ld % 4 == 0, and in
  // a batch, strides that keep every matrix's base aligned.
  constexpr bool kIsFloat = std::is_same_v<T, float>;
  const bool vec = kIsFloat && (K == 0 || (aligned16(A) && aligned16(B) && lda % 4 == 0 && ldb % 4 == 0 &&
                                           stride_a % 4 == 0 && stride_b % 4 == 0));
  const bool c_vec = kIsFloat && aligned16(C) && ldc % 4 == 0 && stride_c % 4 == 0;
  const Batch problems{batch, stride_a, stride_b, stride_c};

  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // The biggest tiling that still gives every SM a block: bigger tiles reuse each loaded element more, but a grid
  // smaller than the GPU leaves SMs idle. (No split-K: small M*N with huge K stays on few blocks.) In a batch, many
  // small matrices (attention's T x T scores) fill the GPU with any tiling: there a tile larger than the matrix would
  // mostly compute padding, so a tiling also has to fit inside M x N.
  auto blocks = [&](int64_t bm, int64_t bn) {
    if (batch > 1 && (M < bm || N < bn)) return int64_t{0};
    return ((M + bm - 1) / bm) * ((N + bn - 1) / bn) * batch;
  };
  if constexpr (kIsFloat) {  // 8x8 double micro tiles would need ~256 registers: double stops at Medium
    if (blocks(LargeTiling::BM, LargeTiling::BN) >= sms) {
      dispatch<T, LargeTiling>(trans_a, trans_b, vec, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, relu, c_vec,
                               problems, stream);
      return;
    }
  }
  if (blocks(MediumTiling::BM, MediumTiling::BN) >= sms) {
    dispatch<T, MediumTiling>(trans_a, trans_b, vec, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, relu, c_vec,
                              problems, stream);
  } else {
    dispatch<T, SmallTiling>(trans_a, trans_b, vec, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, relu, c_vec,
                             problems, stream);
  }
}

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda, const T *B,
          int64_t ldb, T beta, T *C, int64_t ldc, const T *bias, Epilogue epilogue, Stream stream) {
  detail::check_gemm_args("cuda::gemm", trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, bias, epilogue);
  tiled_gemm<T>(trans_a, trans_b, 1, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, bias, epilogue, stream);
}

#define EMBER_INSTANTIATE_TILED_GEMM(T)                                                                               \
  template void tiled_gemm<T>(bool, bool, int64_t, int64_t, int64_t, int64_t, T, const T *, int64_t, int64_t,        \
                              const T *, int64_t, int64_t, T, T *, int64_t, int64_t, const T *, Epilogue, Stream);
EMBER_INSTANTIATE_TILED_GEMM(float)
EMBER_INSTANTIATE_TILED_GEMM(double)
#undef EMBER_INSTANTIATE_TILED_GEMM
template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *, int64_t,
                          float, float *, int64_t, const float *, Epilogue, Stream);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double *, int64_t, const double *,
                           int64_t, double, double *, int64_t, const double *, Epilogue, Stream);

}  // namespace cuda
}  // namespace ember::kernels

// ---- cuBLAS backend ---------------------------------------------------------------------------------------

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
  launch_kernel<epilogue_kernel<T>>(grid_for(M * N, kThreads), kThreads, 0, stream, M, N, C, ldc, scale_c, beta, bias,
                                    relu);
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

CublasLease::CublasLease(Stream stream) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  DeviceHandle &h = handle_for(device);
  lock_ = std::unique_lock<std::mutex>(h.mutex);
  CUBLAS_CHECK(cublasSetStream(h.handle, stream));
  handle_ = h.handle;
}

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

  {
    CublasLease cublas(stream);
    // cuBLAS is column-major; a row-major (M, N) C is a column-major (N, M) C^T, and C^T = op(B)^T op(A)^T.
    // A row-major stored B read column-major is already B^T, so B goes first with its own flag, then A.
    CUBLAS_CHECK(cublasGemmEx_64(cublas.handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, kType, ldb, A, kType, lda,
                                 &beta, C, kType, ldc, kCompute, CUBLAS_GEMM_DEFAULT));
  }
  if (bias != nullptr) launch_epilogue(M, N, C, ldc, /*scale_c=*/false, beta, bias, relu, stream);
}

template void gemm_cublas<float>(bool, bool, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *,
                                 int64_t, float, float *, int64_t, const float *, Epilogue, Stream);
template void gemm_cublas<double>(bool, bool, int64_t, int64_t, int64_t, double, const double *, int64_t,
                                  const double *, int64_t, double, double *, int64_t, const double *, Epilogue, Stream);

}  // namespace cuda
}  // namespace ember::kernels
