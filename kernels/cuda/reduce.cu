// Deterministic CUDA reductions: fixed-order shuffle trees, per-block partials, no float atomics.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/reduce.h"
#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/launch.cuh"

namespace ember::kernels::cuda {

namespace {

// Sums accumulate in double for float too: the kernels are bandwidth-bound, so the FP64 adds are
// free, and results then match the CPU twin (which also sums in double) to float rounding.
using Acc = double;

constexpr int kSumThreads = 256;
// Pass 1 gives each thread at least this many elements before adding blocks, and never launches
// more blocks than one wave of an H200 (132 SMs x 8 blocks of 256) holds: more only costs pass 2.
constexpr int64_t kSumItemsPerThread = 8;
constexpr int64_t kSumMaxBlocks = 1024;

constexpr int kColumnTile = 32;  // sum_rows: one warp spans 32 consecutive columns (coalesced)
constexpr int kRowSlices = 32;   // sum_rows: warps per block, each owning a fixed, strided set of rows
constexpr int kArgmaxWarps = 8;  // argmax/count_correct: rows (warps) per block

constexpr unsigned kFullMask = 0xffffffffu;

int64_t sum_blocks(int64_t n) {
  const int64_t per_block = kSumThreads * kSumItemsPerThread;
  int64_t blocks = (n + per_block - 1) / per_block;
  return blocks < 1 ? 1 : (blocks > kSumMaxBlocks ? kSumMaxBlocks : blocks);
}

// Each block sums a grid-stride slice of x and writes scale * partial to out[blockIdx.x]. The grid
// size depends only on n, so every element always lands in the same partial: deterministic. Used
// for both passes (pass 2 is one block over the partials).
template <typename T>
__global__ void __launch_bounds__(kSumThreads) block_sum_kernel(const T* __restrict__ x, int64_t n, T scale, T* __restrict__ out) {
  __shared__ Acc scratch[32];
  Acc acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    acc += static_cast<Acc>(x[i]);
  acc = block_sum<Acc>(acc, scratch);  // block_sum.cuh: the fixed-order xor tree
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<T>(acc * static_cast<Acc>(scale));
}

// Block (kColumnTile, kRowSlices): thread (tx, ty) sums rows ty, ty + kRowSlices, ... of column
// tile_start + tx in order, then the slices are added in fixed order 0..kRowSlices-1.
template <typename T>
__global__ void __launch_bounds__(kColumnTile * kRowSlices)
    sum_rows_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, T beta, T* __restrict__ out) {
  __shared__ Acc partial[kRowSlices][kColumnTile + 1];  // +1: no bank conflicts on the column read
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t tile = blockIdx.x; tile * kColumnTile < cols; tile += gridDim.x) {
    const int64_t c = tile * kColumnTile + tx;
    Acc acc = 0;
    if (c < cols)
      for (int64_t r = ty; r < rows; r += kRowSlices) acc += static_cast<Acc>(x[r * cols + c]);
    partial[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && c < cols) {
      Acc total = 0;
      for (int s = 0; s < kRowSlices; ++s) total += partial[s][tx];
      // beta == 0 must not read out: it may hold NaN or garbage (PyTorch's beta semantics).
      out[c] = beta == T(0) ? static_cast<T>(total) : static_cast<T>(static_cast<Acc>(beta) * out[c] + total);
    }
    __syncthreads();  // partial is reused by the next tile
  }
}

// NaN is the largest value (PyTorch); equal values (NaN included) go to the smaller index.
template <typename T> __device__ bool beats(T v, int64_t i, T best, int64_t best_i) {
  const bool v_nan = isnan(v), b_nan = isnan(best);
  if (v_nan != b_nan) return v_nan;
  if (!v_nan && v != best) return v > best;
  return i < best_i;
}

// Argmax of one row by one warp; every lane gets the result. Lanes scan strided columns, then the
// (value, index) pairs meet in a shuffle tree whose tie rule keeps the first index.
template <typename T> __device__ int64_t warp_argmax(const T* __restrict__ row, int64_t cols, int lane) {
  T best = -INFINITY;
  int64_t best_i = INT64_MAX;  // loses to any real column, even one holding -inf
  for (int64_t c = lane; c < cols; c += 32) {
    const T v = row[c];
    if (beats(v, c, best, best_i)) {
      best = v;
      best_i = c;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const T other = __shfl_xor_sync(kFullMask, best, offset);
    const int64_t other_i = __shfl_xor_sync(kFullMask, best_i, offset);
    if (beats(other, other_i, best, best_i)) {
      best = other;
      best_i = other_i;
    }
  }
  return best_i;
}

template <typename T>
__global__ void __launch_bounds__(kArgmaxWarps * 32)
    argmax_rows_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, int64_t* __restrict__ out) {
  const int lane = threadIdx.x % 32;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kArgmaxWarps + threadIdx.x / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kArgmaxWarps;
  for (int64_t r = warp; r < rows; r += warps) {  // warp-uniform bound: all lanes reach the shuffles
    const int64_t best = warp_argmax(x + r * cols, cols, lane);
    if (lane == 0) out[r] = best;
  }
}

// One warp per row; a block counts its hits in shared memory and adds them to *out with one
// integer atomic (exact and order-independent, so the count is deterministic).
template <typename T, typename L>
__global__ void __launch_bounds__(kArgmaxWarps * 32)
    count_correct_kernel(const T* __restrict__ logits, const L* __restrict__ labels, int64_t rows,
                         int64_t cols, unsigned long long* __restrict__ out) {
  __shared__ unsigned int block_hits;
  if (threadIdx.x == 0) block_hits = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kArgmaxWarps + threadIdx.x / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kArgmaxWarps;
  unsigned int hits = 0;
  for (int64_t r = warp; r < rows; r += warps) {
    const int64_t best = warp_argmax(logits + r * cols, cols, lane);
    if (lane == 0 && best == static_cast<int64_t>(labels[r])) ++hits;
  }
  if (lane == 0 && hits > 0) atomicAdd(&block_hits, hits);
  __syncthreads();
  if (threadIdx.x == 0 && block_hits > 0) atomicAdd(out, static_cast<unsigned long long>(block_hits));
}

}  // namespace

size_t sum_workspace_elems(int64_t n) { return static_cast<size_t>(sum_blocks(n)); }

template <typename T> void sum(const T* x, int64_t n, T scale, T* out, T* workspace, Stream stream) {
  EMBER_ASSERT(n >= 0, "sum over a negative count ", n);
  const auto blocks = static_cast<unsigned>(sum_blocks(n));
  if (blocks == 1) {  // small n: one launch, no partials
    launch_kernel<block_sum_kernel<T>>(1, kSumThreads, 0, stream, x, n, scale, out);
    EMBER_LAUNCH_CHECK("block_sum_kernel");
    return;
  }
  EMBER_ASSERT(workspace != nullptr, "sum of ", n, " elements needs a workspace of ", blocks, " elements");
  launch_kernel<block_sum_kernel<T>>(blocks, kSumThreads, 0, stream, x, n, T(1), workspace);
  EMBER_LAUNCH_CHECK("block_sum_kernel (partials)");
  launch_kernel<block_sum_kernel<T>>(1, kSumThreads, 0, stream, workspace, static_cast<int64_t>(blocks), scale, out);
  EMBER_LAUNCH_CHECK("block_sum_kernel (final)");
}

template <typename T> void sum_rows(const T* x, int64_t rows, int64_t cols, T beta, T* out, Stream stream) {
  if (cols <= 0) return;
  const dim3 block(kColumnTile, kRowSlices);
  const unsigned grid = grid_for(cols, kColumnTile);
  launch_kernel<sum_rows_kernel<T>>(grid, block, 0, stream, x, rows, cols, beta, out);
  EMBER_LAUNCH_CHECK("sum_rows_kernel");
}

template <typename T> void argmax_rows(const T* x, int64_t rows, int64_t cols, int64_t* out, Stream stream) {
  if (rows <= 0) return;
  EMBER_ASSERT(cols > 0, "argmax_rows over rows with no columns");
  launch_kernel<argmax_rows_kernel<T>>(grid_for(rows, kArgmaxWarps), kArgmaxWarps * 32, 0, stream, x, rows, cols, out);
  EMBER_LAUNCH_CHECK("argmax_rows_kernel");
}

template <typename T, typename L>
void count_correct(const T* logits, const L* labels, int64_t rows, int64_t cols, int64_t* out, Stream stream) {
  static_assert(sizeof(int64_t) == sizeof(unsigned long long));
  // The kernel adds to *out; the launcher owns the zeroing so out = count, as on the CPU.
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(int64_t), stream));
  if (rows <= 0) return;
  EMBER_ASSERT(cols > 0, "count_correct over rows with no columns");
  launch_kernel<count_correct_kernel<T, L>>(grid_for(rows, kArgmaxWarps), kArgmaxWarps * 32, 0, stream, logits, labels,
                                            rows, cols, reinterpret_cast<unsigned long long*>(out));
  EMBER_LAUNCH_CHECK("count_correct_kernel");
}

#define EMBER_REDUCE_CUDA(T)                                                                              \
  template void sum<T>(const T*, int64_t, T, T*, T*, Stream);                                             \
  template void sum_rows<T>(const T*, int64_t, int64_t, T, T*, Stream);                                   \
  template void argmax_rows<T>(const T*, int64_t, int64_t, int64_t*, Stream);                             \
  template void count_correct<T, int32_t>(const T*, const int32_t*, int64_t, int64_t, int64_t*, Stream); \
  template void count_correct<T, int64_t>(const T*, const int64_t*, int64_t, int64_t, int64_t*, Stream);
EMBER_REDUCE_CUDA(float)
EMBER_REDUCE_CUDA(double)
#undef EMBER_REDUCE_CUDA

}  // namespace ember::kernels::cuda
