// CUDA attention, flash-attention style: the (Tq, Tk) weights live only in registers and shared memory. The forward
// walks the keys in shared-memory tiles with an online softmax and saves each row's logsumexp; the backward
// recomputes the weights from it in two atomics-free kernels (dk/dv per key tile, dq per query row).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/attention.h"
#include "kernels/cuda/launch.cuh"

namespace ember::kernels::cuda {

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarps = 4;  // query rows a block works on at once, a warp each
constexpr int kThreads = kWarps * 32;
// Keys per shared tile: lane j of a warp scores key j0 + j. float64 tiles hold half as many keys (lanes 16-31 then
// score nothing) so K and V tiles of D = 128 stay within the 48 KiB of static shared memory.
template <typename T> constexpr int kTileKeys = sizeof(T) == 4 ? 32 : 16;

__device__ inline float exp_(float v) { return expf(v); }
__device__ inline double exp_(double v) { return exp(v); }
__device__ inline float log_(float v) { return logf(v); }
__device__ inline double log_(double v) { return log(v); }
template <typename T> __device__ inline T max_(T a, T b) { return b > a ? b : a; }
template <typename T> __device__ inline T minus_inf() { return -static_cast<T>(INFINITY); }

// Every lane gets the result; the xor butterfly fixes the order.
template <typename T> __device__ inline T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}
template <typename T> __device__ inline T warp_max(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = max_(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// One tile of K and V rows. Rows padded to kMaxD + 1 so lane j reading row j, column e hits bank (j + e) % 32.
template <typename T, int kMaxD> struct KeyTile {
  T k[kTileKeys<T>][kMaxD + 1];
  T v[kTileKeys<T>][kMaxD + 1];
};

// Keys j0 .. j0 + tile - 1 of one (b, h) slice, zeros past Tk; the whole block loads, adjacent threads adjacent columns.
template <typename T, int kMaxD>
__device__ void load_key_tile(KeyTile<T, kMaxD>& tile, const T* k, const T* v, int64_t j0, const AttentionDims& d) {
  const int64_t D = d.head_dim;
  for (int64_t idx = threadIdx.x; idx < kTileKeys<T> * D; idx += blockDim.x) {
    const int64_t r = idx / D, e = idx % D;
    const bool in = j0 + r < d.k_len;
    tile.k[r][e] = in ? k[(j0 + r) * D + e] : T(0);
    tile.v[r][e] = in ? v[(j0 + r) * D + e] : T(0);
  }
}

template <typename T> __device__ inline T dot_shared(const T* x, const T* y, int64_t D) {
  T s = 0;
  for (int64_t e = 0; e < D; ++e) s += x[e] * y[e];
  return s;
}

// The keys a block of query rows [i0, i0 + kWarps) needs: with causal, none past its last row.
__device__ inline int64_t key_end(const AttentionDims& d, int64_t i0) {
  if (!d.causal) return d.k_len;
  const int64_t last_row = i0 + kWarps < d.q_len ? i0 + kWarps : d.q_len;
  return last_row < d.k_len ? last_row : d.k_len;
}

// Block (bh, query rows i0 + warp). Per key tile each lane scores one key; the row's running max m and sum l
// follow the online softmax: when the max grows, l and the output accumulator are rescaled by exp(m_old - m_new).
// Lane `lane` owns output columns lane, lane + 32, ... All loop bounds are uniform per block or per warp.
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads) forward_kernel(AttentionForwardArgs<T> a, int64_t row_blocks) {
  constexpr int kTile = kTileKeys<T>, kPerLane = kMaxD / 32;
  __shared__ KeyTile<T, kMaxD> tile;
  __shared__ T q_rows[kWarps][kMaxD];
  const AttentionDims d = a.dims;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t bh = blockIdx.x / row_blocks, i0 = (blockIdx.x % row_blocks) * kWarps, i = i0 + warp;
  const int64_t b = bh / d.heads, D = d.head_dim;
  const bool active = i < d.q_len;
  if (active)
    for (int64_t e = lane; e < D; e += 32) q_rows[warp][e] = a.q[(bh * d.q_len + i) * D + e];
  const T scale = static_cast<T>(d.scale);
  T m = minus_inf<T>(), l = 0, acc[kPerLane] = {};
  const T* k = a.k + bh * d.k_len * D;
  const T* v = a.v + bh * d.k_len * D;
  const int64_t end = key_end(d, i0);
  for (int64_t j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();  // the previous tile is consumed (and, the first time, q_rows written)
    load_key_tile(tile, k, v, j0, d);
    __syncthreads();
    if (!active) continue;
    const int64_t j = j0 + lane;
    const bool valid = lane < kTile && j < d.k_len && !attention_masked(d, a.key_padding_mask, b, i, j);
    const T s = valid ? scale * dot_shared(q_rows[warp], tile.k[lane], D) : minus_inf<T>();
    const T m_new = max_(m, warp_max(s));
    if (m_new == minus_inf<T>()) continue;  // no unmasked key yet
    const T rescale = exp_(m - m_new);     // 0 while m is -inf
    const T p = valid ? exp_(s - m_new) : T(0);
    l = l * rescale + warp_sum(p);
    const T kept = valid ? p * attention_keep_factor<T>(d, bh, i, j) : T(0);
    for (int c = 0; c < kPerLane; ++c) acc[c] *= rescale;
    for (int jj = 0; jj < kTile; ++jj) {
      const T w = __shfl_sync(kFullMask, kept, jj);
      if (w == T(0)) continue;  // the same w in every lane: masked, dropped or underflowed
      for (int c = 0; c < kPerLane; ++c)
        if (lane + 32 * c < D) acc[c] += w * tile.v[jj][lane + 32 * c];
    }
    m = m_new;
  }
  if (!active) return;
  T* out = a.out + (bh * d.q_len + i) * D;
  for (int c = 0; c < kPerLane; ++c)
    if (lane + 32 * c < D) out[lane + 32 * c] = l > T(0) ? acc[c] / l : T(0);
  if (lane == 0) a.logsumexp[bh * d.q_len + i] = l > T(0) ? m + log_(l) : minus_inf<T>();
}

// What a warp needs of query row i for the backward: its logsumexp and Delta_i = dO_i . O_i, with q_i and dO_i
// copied to shared rows. Every lane gets both scalars.
template <typename T> struct RowState {
  T lse, delta;
};
template <typename T>
__device__ RowState<T> load_row(const AttentionBackwardArgs<T>& a, int64_t bh, int64_t i, T* q_row, T* dout_row) {
  const int64_t D = a.dims.head_dim, lane = threadIdx.x % 32, row = bh * a.dims.q_len + i;
  T partial = 0;
  for (int64_t e = lane; e < D; e += 32) {
    q_row[e] = a.q[row * D + e];
    dout_row[e] = a.grad_out[row * D + e];
    partial += dout_row[e] * a.out[row * D + e];
  }
  return {a.logsumexp[row], warp_sum(partial)};
}

// The gradient pieces of weight (i, j) for lane j: the weight after dropout (for dv) and scale * dS_ij (for dq and
// dk), both 0 for a masked key or a row without keys.
template <typename T> struct WeightGrad {
  T kept, dscore;
};
template <typename T, int kMaxD>
__device__ WeightGrad<T> weight_grad(const AttentionBackwardArgs<T>& a, const KeyTile<T, kMaxD>& tile, int r,
                                     int64_t bh, int64_t i, int64_t j, RowState<T> row, const T* q_row,
                                     const T* dout_row) {
  const AttentionDims& d = a.dims;
  if (r >= kTileKeys<T> || j >= d.k_len || row.lse == minus_inf<T>() || attention_masked(d, a.key_padding_mask, bh / d.heads, i, j))
    return {T(0), T(0)};
  const T scale = static_cast<T>(d.scale);
  const T p = exp_(scale * dot_shared(q_row, tile.k[r], d.head_dim) - row.lse);
  const T keep = attention_keep_factor<T>(d, bh, i, j);
  const T dp = dot_shared(dout_row, tile.v[r], d.head_dim) * keep;
  return {p * keep, p * (dp - row.delta) * scale};
}

// dq: block (bh, query rows i0 + warp) walks the key tiles like the forward; lane j finds dS_ij, then every lane
// adds sum_j dS_ij k_j to the columns it owns, j in order.
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads) backward_dq_kernel(AttentionBackwardArgs<T> a, int64_t row_blocks) {
  constexpr int kTile = kTileKeys<T>, kPerLane = kMaxD / 32;
  __shared__ KeyTile<T, kMaxD> tile;
  __shared__ T q_rows[kWarps][kMaxD], dout_rows[kWarps][kMaxD];
  const AttentionDims d = a.dims;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t bh = blockIdx.x / row_blocks, i0 = (blockIdx.x % row_blocks) * kWarps, i = i0 + warp;
  const int64_t D = d.head_dim;
  const bool active = i < d.q_len;
  RowState<T> row{minus_inf<T>(), T(0)};
  if (active) row = load_row(a, bh, i, q_rows[warp], dout_rows[warp]);
  T acc[kPerLane] = {};
  const int64_t end = key_end(d, i0);  // the block's, not the warp's: every warp reaches the barriers
  for (int64_t j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();
    load_key_tile(tile, a.k + bh * d.k_len * D, a.v + bh * d.k_len * D, j0, d);
    __syncthreads();
    if (!active) continue;
    const T ds = weight_grad(a, tile, lane, bh, i, j0 + lane, row, q_rows[warp], dout_rows[warp]).dscore;
    for (int jj = 0; jj < kTile; ++jj) {
      const T w = __shfl_sync(kFullMask, ds, jj);
      if (w == T(0)) continue;
      for (int c = 0; c < kPerLane; ++c)
        if (lane + 32 * c < D) acc[c] += w * tile.k[jj][lane + 32 * c];
    }
  }
  if (!active) return;
  for (int c = 0; c < kPerLane; ++c)
    if (lane + 32 * c < D) a.dq[(bh * d.q_len + i) * D + lane + 32 * c] = acc[c];
}

}  // namespace

namespace {

// dk and dv: block (bh, key tile j0) holds its K and V rows and walks the query rows kWarps at a time. Warp w
// finds the tile's weights and dS for row i0 + w (lane j, key j0 + j) into shared memory; then thread
// (key r, group g) adds them, row by row in order, to the columns g, g + groups, ... of dk and dv of key r that it
// keeps in registers. Each key tile has one owner: no atomics, the same bits every run.
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads) backward_dkdv_kernel(AttentionBackwardArgs<T> a, int64_t key_blocks) {
  constexpr int kTile = kTileKeys<T>, kGroups = kThreads / kTile, kPerThread = kMaxD / kGroups;
  __shared__ KeyTile<T, kMaxD> tile;
  __shared__ T q_rows[kWarps][kMaxD], dout_rows[kWarps][kMaxD];
  __shared__ T kept_s[kWarps][kTile], dscore_s[kWarps][kTile];
  const AttentionDims d = a.dims;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int key = threadIdx.x % kTile, group = threadIdx.x / kTile;
  const int64_t bh = blockIdx.x / key_blocks, j0 = (blockIdx.x % key_blocks) * kTile, D = d.head_dim;
  load_key_tile(tile, a.k + bh * d.k_len * D, a.v + bh * d.k_len * D, j0, d);
  T dk[kPerThread] = {}, dv[kPerThread] = {};
  // With causal, rows before j0 see none of these keys.
  for (int64_t i0 = d.causal ? j0 / kWarps * kWarps : 0; i0 < d.q_len; i0 += kWarps) {
    __syncthreads();  // the tile is loaded, and the previous rows are consumed
    const int64_t i = i0 + warp;
    WeightGrad<T> g{T(0), T(0)};
    if (i < d.q_len) {
      const RowState<T> row = load_row(a, bh, i, q_rows[warp], dout_rows[warp]);
      __syncwarp();
      g = weight_grad(a, tile, lane, bh, i, j0 + lane, row, q_rows[warp], dout_rows[warp]);
    }
    if (lane < kTile) {
      kept_s[warp][lane] = g.kept;
      dscore_s[warp][lane] = g.dscore;
    }
    __syncthreads();
    for (int w = 0; w < kWarps && i0 + w < d.q_len; ++w) {
      const T kept = kept_s[w][key], dscore = dscore_s[w][key];
      for (int c = 0; c < kPerThread; ++c) {
        const int64_t e = group + static_cast<int64_t>(kGroups) * c;
        if (e < D) {
          dv[c] += kept * dout_rows[w][e];
          dk[c] += dscore * q_rows[w][e];
        }
      }
    }
  }
  const int64_t j = j0 + key;
  if (j >= d.k_len) return;
  for (int c = 0; c < kPerThread; ++c) {
    const int64_t e = group + static_cast<int64_t>(kGroups) * c;
    if (e < D) {
      a.dk[(bh * d.k_len + j) * D + e] = dk[c];
      a.dv[(bh * d.k_len + j) * D + e] = dv[c];
    }
  }
}

int64_t blocks_of(int64_t n, int64_t per_block) { return (n + per_block - 1) / per_block; }

// The smallest of 32, 64 and 128 that holds D: the shared rows' width and the per-lane register count.
template <typename T, template <typename, int> class Launch, typename Args>
void by_head_dim(const Args& a, Stream stream) {
  const int64_t D = a.dims.head_dim;
  EMBER_ASSERT(D >= 1 && D <= kAttentionMaxHeadDim, "attention: head dim ", D, " outside [1, 128]");
  if (D <= 32) Launch<T, 32>::run(a, stream);
  else if (D <= 64) Launch<T, 64>::run(a, stream);
  else Launch<T, 128>::run(a, stream);
}

template <typename T, int kMaxD> struct LaunchForward {
  static void run(const AttentionForwardArgs<T>& a, Stream stream) {
    const int64_t row_blocks = blocks_of(a.dims.q_len, kWarps);
    const auto blocks = static_cast<unsigned>(a.dims.batch * a.dims.heads * row_blocks);
    launch_kernel<forward_kernel<T, kMaxD>>(blocks, kThreads, 0, stream, a, row_blocks);
    EMBER_LAUNCH_CHECK("attention forward_kernel");
  }
};

template <typename T, int kMaxD> struct LaunchBackward {
  static void run(const AttentionBackwardArgs<T>& a, Stream stream) {
    const int64_t bh = a.dims.batch * a.dims.heads;
    const int64_t row_blocks = blocks_of(a.dims.q_len, kWarps), key_blocks = blocks_of(a.dims.k_len, kTileKeys<T>);
    if (row_blocks > 0) {
      launch_kernel<backward_dq_kernel<T, kMaxD>>(static_cast<unsigned>(bh * row_blocks), kThreads, 0, stream, a,
                                                  row_blocks);
      EMBER_LAUNCH_CHECK("attention backward_dq_kernel");
    }
    if (key_blocks > 0) {
      launch_kernel<backward_dkdv_kernel<T, kMaxD>>(static_cast<unsigned>(bh * key_blocks), kThreads, 0, stream, a,
                                                    key_blocks);
      EMBER_LAUNCH_CHECK("attention backward_dkdv_kernel");
    }
  }
};

}  // namespace

template <typename T> void attention_forward(const AttentionForwardArgs<T>& a, Stream stream) {
  if (a.dims.batch <= 0 || a.dims.heads <= 0 || a.dims.q_len <= 0) return;
  by_head_dim<T, LaunchForward>(a, stream);
}

template <typename T> void attention_backward(const AttentionBackwardArgs<T>& a, Stream stream) {
  if (a.dims.batch <= 0 || a.dims.heads <= 0) return;
  by_head_dim<T, LaunchBackward>(a, stream);
}

template void attention_forward<float>(const AttentionForwardArgs<float>&, Stream);
template void attention_forward<double>(const AttentionForwardArgs<double>&, Stream);
template void attention_backward<float>(const AttentionBackwardArgs<float>&, Stream);
template void attention_backward<double>(const AttentionBackwardArgs<double>&, Stream);

}  // namespace ember::kernels::cuda
