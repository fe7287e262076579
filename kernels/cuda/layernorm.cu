// CUDA layer normalisation: a warp per row for the forward and for backward's dx (row sums in double, a fixed
// xor tree), and a block per 32 columns for dweight/dbias whose 16 row slices are added in a fixed order.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/layernorm.h"

namespace ember::kernels::cuda {

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRowThreads = 128;  // 4 warps, a row each
constexpr int kRowsPerBlock = kRowThreads / 32;
constexpr int kColumnsPerBlock = 32;  // the parameter-gradient kernel: a warp's worth of adjacent columns ...
constexpr int kRowSlices = 16;        // ... times 16 slices of the rows
constexpr int kColumnThreads = kColumnsPerBlock * kRowSlices;

// Every lane gets the sum; the xor butterfly fixes the order.
__device__ inline double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

template <typename T> __device__ inline T weight_at(const T* w, int64_t c) { return w ? w[c] : T(1); }

// The loop bound depends on the warp alone, so whole warps reach every shuffle.
template <typename T>
__global__ void __launch_bounds__(kRowThreads) forward_kernel(LayerNormForwardArgs<T> a) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const auto cols = static_cast<double>(a.cols);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp; r < a.rows;
       r += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const T* x = a.x + r * a.cols;
    double s = 0;
    for (int64_t c = lane; c < a.cols; c += 32) s += static_cast<double>(x[c]);
    const double mean = warp_sum(s) / cols;
    double ss = 0;
    for (int64_t c = lane; c < a.cols; c += 32) {
      const double d = static_cast<double>(x[c]) - mean;
      ss += d * d;
    }
    const T m = static_cast<T>(mean);
    const T rstd = static_cast<T>(1.0 / sqrt(warp_sum(ss) / cols + static_cast<double>(a.eps)));
    T* y = a.y + r * a.cols;
    for (int64_t c = lane; c < a.cols; c += 32)
      y[c] = (x[c] - m) * rstd * weight_at(a.weight, c) + (a.bias ? a.bias[c] : T(0));
    if (lane == 0) {
      a.mean[r] = m;
      a.rstd[r] = rstd;
    }
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight, xhat recomputed from mean and rstd.
template <typename T>
__global__ void __launch_bounds__(kRowThreads) backward_dx_kernel(LayerNormBackwardArgs<T> a) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const auto cols = static_cast<double>(a.cols);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp; r < a.rows;
       r += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const T* x = a.x + r * a.cols;
    const T* dy = a.dy + r * a.cols;
    const T mean = a.mean[r], rstd = a.rstd[r];
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = lane; c < a.cols; c += 32) {
      const T g = dy[c] * weight_at(a.weight, c);
      sum_g += static_cast<double>(g);
      sum_gx += static_cast<double>(g) * static_cast<double>((x[c] - mean) * rstd);
    }
    const T mean_g = static_cast<T>(warp_sum(sum_g) / cols);
    const T mean_gx = static_cast<T>(warp_sum(sum_gx) / cols);
    T* dx = a.dx + r * a.cols;
    for (int64_t c = lane; c < a.cols; c += 32) {
      const T xhat = (x[c] - mean) * rstd;
      dx[c] = rstd * (dy[c] * weight_at(a.weight, c) - mean_g - xhat * mean_gx);
    }
  }
}

// Thread (column, slice) sums rows slice, slice + 16, ... of its column (adjacent threads read adjacent
// columns); the 16 slice sums are then added in slice order. Threads past the last column still reach the barrier.
template <typename T>
__global__ void __launch_bounds__(kColumnThreads) backward_params_kernel(LayerNormBackwardArgs<T> a) {
  __shared__ double dw_slices[kRowSlices][kColumnsPerBlock + 1];
  __shared__ double db_slices[kRowSlices][kColumnsPerBlock + 1];
  const int lane = threadIdx.x % kColumnsPerBlock, slice = threadIdx.x / kColumnsPerBlock;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnsPerBlock + lane;
  double dw = 0, db = 0;
  if (c < a.cols) {
    for (int64_t r = slice; r < a.rows; r += kRowSlices) {
      const T g = a.dy[r * a.cols + c];
      dw += static_cast<double>(g) * static_cast<double>((a.x[r * a.cols + c] - a.mean[r]) * a.rstd[r]);
      db += static_cast<double>(g);
    }
  }
  dw_slices[slice][lane] = dw;
  db_slices[slice][lane] = db;
  __syncthreads();
  if (slice != 0 || c >= a.cols) return;
  for (int s = 1; s < kRowSlices; ++s) {
    dw += dw_slices[s][lane];
    db += db_slices[s][lane];
  }
  if (a.dweight) a.dweight[c] += static_cast<T>(dw);
  if (a.dbias) a.dbias[c] += static_cast<T>(db);
}

}  // namespace

template <typename T> void layernorm_forward(const LayerNormForwardArgs<T>& a, Stream stream) {
  if (a.rows <= 0 || a.cols <= 0) return;
  launch_kernel<forward_kernel<T>>(grid_for(a.rows, kRowsPerBlock), kRowThreads, 0, stream, a);
  EMBER_LAUNCH_CHECK("layernorm forward_kernel");
}

template <typename T> void layernorm_backward(const LayerNormBackwardArgs<T>& a, Stream stream) {
  if (a.rows <= 0 || a.cols <= 0) return;
  launch_kernel<backward_dx_kernel<T>>(grid_for(a.rows, kRowsPerBlock), kRowThreads, 0, stream, a);
  EMBER_LAUNCH_CHECK("layernorm backward_dx_kernel");
  if (a.dweight == nullptr && a.dbias == nullptr) return;
  const auto blocks = static_cast<unsigned>((a.cols + kColumnsPerBlock - 1) / kColumnsPerBlock);
  launch_kernel<backward_params_kernel<T>>(blocks, kColumnThreads, 0, stream, a);
  EMBER_LAUNCH_CHECK("layernorm backward_params_kernel");
}

template void layernorm_forward<float>(const LayerNormForwardArgs<float>&, Stream);
template void layernorm_forward<double>(const LayerNormForwardArgs<double>&, Stream);
template void layernorm_backward<float>(const LayerNormBackwardArgs<float>&, Stream);
template void layernorm_backward<double>(const LayerNormBackwardArgs<double>&, Stream);

}  // namespace ember::kernels::cuda
