// CUDA embedding: a warp per row for the gather, and a scatter-add without atomics on the gradient: a block per range
// of vocabulary rows scans the ids in order, compacts the ones in its range and adds their rows. Bad ids are never
// dereferenced; they lower a device flag to the first bad position instead.
#include <cuda_runtime.h>

#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/embedding.h"

namespace ember::kernels::cuda {

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRowThreads = 128;  // the forward: 4 warps, a row each
constexpr int kRowsPerBlock = kRowThreads / 32;
constexpr int kScanThreads = 256;  // the backward: ids read per tile, and the columns one pass adds
constexpr int kScanWarps = kScanThreads / 32;
constexpr int64_t kMaxScanBlocks = 512;  // each block reads every id: enough blocks to fill a GPU, no more

__device__ inline bool in_range(int64_t id, int64_t first, int64_t last) { return id >= first && id < last; }

// Lowers the flag to `position` (the smallest bad position wins, whatever the order the threads arrive in).
__device__ inline void flag_bad(int64_t* bad_position, int64_t position) {
  atomicMin(reinterpret_cast<long long*>(bad_position), static_cast<long long>(position));
}

template <typename T, typename I>
__global__ void __launch_bounds__(kRowThreads)
    forward_kernel(const T* __restrict__ weight, const I* __restrict__ ids, T* __restrict__ out, int64_t n, int64_t V,
                   int64_t E, int64_t* bad_position) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp; i < n;
       i += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const auto id = static_cast<int64_t>(ids[i]);
    T* row = out + i * E;
    if (!in_range(id, 0, V)) {
      if (lane == 0) flag_bad(bad_position, i);
      for (int64_t c = lane; c < E; c += 32) row[c] = T(0);
      continue;
    }
    const T* src = weight + id * E;
    for (int64_t c = lane; c < E; c += 32) row[c] = src[c];
  }
}

// Block b owns vocabulary rows [b * rows_per_block, ...). Per tile of kScanThreads ids: each thread tests one id,
// the warps' ballots give every match its slot in `matches` (in the order of the ids), then the block walks the
// matches in that order, thread t adding columns t, t + kScanThreads, ... of each. One thread writes each gradient
// element, always in the order of i: the CPU twin's sums, bit for bit.
template <typename T, typename I>
__global__ void __launch_bounds__(kScanThreads)
    backward_kernel(const T* __restrict__ grad_out, const I* __restrict__ ids, T* __restrict__ grad_weight, int64_t n,
                    int64_t V, int64_t E, int64_t rows_per_block, int64_t* bad_position) {
  __shared__ int64_t matches[kScanThreads];
  __shared__ int warp_matches[kScanWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int64_t last = first + rows_per_block < V ? first + rows_per_block : V;
  for (int64_t tile = 0; tile < n; tile += kScanThreads) {  // the same trips for every thread: barriers are safe
    const int64_t i = tile + threadIdx.x;
    const int64_t id = i < n ? static_cast<int64_t>(ids[i]) : -1;
    if (blockIdx.x == 0 && i < n && !in_range(id, 0, V)) flag_bad(bad_position, i);  // one block reports
    const bool mine = i < n && in_range(id, first, last);
    const unsigned ballot = __ballot_sync(kFullMask, mine);
    if (lane == 0) warp_matches[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, count = 0;
    for (int w = 0; w < kScanWarps; ++w) {
      before += w < warp ? warp_matches[w] : 0;
      count += warp_matches[w];
    }
    if (mine) matches[before + __popc(ballot & ((1u << lane) - 1u))] = i;
    __syncthreads();
    for (int m = 0; m < count; ++m) {
      const int64_t position = matches[m];
      T* row = grad_weight + static_cast<int64_t>(ids[position]) * E;
      const T* g = grad_out + position * E;
      for (int64_t c = threadIdx.x; c < E; c += kScanThreads) row[c] += g[c];
    }
    __syncthreads();  // the next tile rewrites matches and warp_matches
  }
}

}  // namespace

template <typename T, typename I>
void embedding_forward(const T* weight, const I* ids, T* out, int64_t n, int64_t V, int64_t E, int64_t* bad_position,
                       Stream stream) {
  EMBER_ASSERT(bad_position != nullptr, "embedding_forward needs a bad_position flag");
  if (n <= 0) return;
  launch_kernel<forward_kernel<T, I>>(grid_for(n, kRowsPerBlock), kRowThreads, 0, stream, weight, ids, out, n, V, E,
                                      bad_position);
  EMBER_LAUNCH_CHECK("embedding forward_kernel");
}

template <typename T, typename I>
void embedding_backward(const T* grad_out, const I* ids, T* grad_weight, int64_t n, int64_t V, int64_t E,
                        int64_t* bad_position, Stream stream) {
  EMBER_ASSERT(bad_position != nullptr, "embedding_backward needs a bad_position flag");
  if (n <= 0) return;
  // At least one block even for V = 0, so that every id is still checked.
  const int64_t rows_per_block = V <= 0 ? 1 : (V + kMaxScanBlocks - 1) / kMaxScanBlocks;
  const auto blocks = static_cast<unsigned>(V <= 0 ? 1 : (V + rows_per_block - 1) / rows_per_block);
  launch_kernel<backward_kernel<T, I>>(blocks, kScanThreads, 0, stream, grad_out, ids, grad_weight, n, V, E,
                                       rows_per_block, bad_position);
  EMBER_LAUNCH_CHECK("embedding backward_kernel");
}

#define EMBER_EMBEDDING_CUDA(T, I)                                                                                    \
  template void embedding_forward<T, I>(const T*, const I*, T*, int64_t, int64_t, int64_t, int64_t*, Stream);       \
  template void embedding_backward<T, I>(const T*, const I*, T*, int64_t, int64_t, int64_t, int64_t*, Stream);
EMBER_EMBEDDING_CUDA(float, int32_t)
EMBER_EMBEDDING_CUDA(float, int64_t)
EMBER_EMBEDDING_CUDA(double, int32_t)
EMBER_EMBEDDING_CUDA(double, int64_t)
#undef EMBER_EMBEDDING_CUDA

}  // namespace ember::kernels::cuda
