// CUDA softmax / log-softmax (forward, backward) and fused softmax-cross-entropy: a warp (or part of
// one) per row for up to 1024 columns with the row held in registers, a block per row beyond.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/softmax_xent.h"
#include "kernels/cuda/launch.cuh"

namespace ember::kernels::cuda {

namespace {

enum class Forward { Softmax, LogSoftmax, Xent };
enum class Backward { Softmax, LogSoftmax };

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpKernelThreads = 128;  // 4 warps: small blocks keep many rows in flight per SM
constexpr int kRowKernelThreads = 512;   // block-per-row kernels (cols > kMaxWarpCols)
constexpr int64_t kMaxWarpCols = 1024;   // 32 lanes x 32 registers per lane
constexpr int kElementwiseThreads = 256;

__device__ inline float exp_(float v) { return expf(v); }
__device__ inline double exp_(double v) { return exp(v); }
__device__ inline float log_(float v) { return logf(v); }
__device__ inline double log_(double v) { return log(v); }

template <typename T> __device__ T max_(T a, T b) { return b > a ? b : a; }

// Reductions inside groups of kWidth lanes (kWidth a power of two <= 32); every lane of the group
// gets the result. The xor butterfly fixes the order, so results are deterministic.
template <int kWidth, typename T> __device__ T group_sum(T v) {
  for (int offset = kWidth / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset, kWidth);
  return v;
}
template <int kWidth, typename T> __device__ T group_max(T v) {
  for (int offset = kWidth / 2; offset > 0; offset >>= 1) v = max_(v, __shfl_xor_sync(kFullMask, v, offset, kWidth));
  return v;
}

// Block-wide reductions for the block-per-row kernels; the result is valid in every thread.
// The leading barrier lets a block call them back to back on the same scratch.
template <typename T, bool kMax> __device__ T block_reduce(T v, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = kMax ? group_max<32>(v) : group_sum<32>(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const T identity = kMax ? -static_cast<T>(INFINITY) : T(0);
  v = lane < warps ? scratch[lane] : identity;
  return kMax ? group_max<32>(v) : group_sum<32>(v);
}

// Out-of-range labels never index memory: the row's loss becomes NaN and the smallest bad row is
// recorded (atomicMin on the bits: the caller's -1 is the largest unsigned value), so the report is
// deterministic and names the same row the CPU twin would.
template <typename T, typename L>
__device__ void xent_row_loss(const T* __restrict__ xr, const L* __restrict__ labels, T m, T sum_exp, int64_t r,
                              int64_t cols, T* __restrict__ loss, int64_t* __restrict__ bad_row) {
  const auto label = static_cast<int64_t>(labels[r]);
  if (label < 0 || label >= cols) {
    loss[r] = static_cast<T>(NAN);
    atomicMin(reinterpret_cast<unsigned long long*>(bad_row), static_cast<unsigned long long>(r));
  } else {
    loss[r] = log_(sum_exp) - (xr[label] - m);  // logsumexp - x[label], without cancellation
  }
}

// Groups of kWidth lanes own one row each (32 / kWidth rows per warp, so 10-class rows use 16 lanes
// and two rows per warp); each lane keeps kPerLane strided elements in registers, so x is read once.
template <typename T, typename L, Forward kMode, int kWidth, int kPerLane>
__global__ void __launch_bounds__(kWarpKernelThreads)
    forward_warp_kernel(const T* __restrict__ x, const L* __restrict__ labels, T* __restrict__ y,
                        T* __restrict__ loss, int64_t rows, int64_t cols, int64_t* __restrict__ bad_row) {
  constexpr int kRowsPerBlock = kWarpKernelThreads / kWidth;
  const int lane = threadIdx.x % kWidth;
  const int group = threadIdx.x / kWidth;
  // The loop bound is warp-uniform (base is per block), so whole warps reach every shuffle.
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t r = base + group;
    const bool active = r < rows;
    const T* xr = x + r * cols;
    T v[kPerLane];
    T m = -static_cast<T>(INFINITY);
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int64_t c = lane + k * kWidth;
      v[k] = active && c < cols ? xr[c] : -static_cast<T>(INFINITY);
      m = max_(m, v[k]);
    }
    m = group_max<kWidth>(m);
    T s = 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int64_t c = lane + k * kWidth;
      if (active && c < cols) {
        const T e = exp_(v[k] - m);
        s += e;
        if constexpr (kMode != Forward::LogSoftmax) v[k] = e;
      }
    }
    s = group_sum<kWidth>(s);
    if (!active) continue;
    T* yr = y + r * cols;
    if constexpr (kMode == Forward::LogSoftmax) {
      const T log_s = log_(s);
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        const int64_t c = lane + k * kWidth;
        if (c < cols) yr[c] = (v[k] - m) - log_s;
      }
    } else {
      const T inv = T(1) / s;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        const int64_t c = lane + k * kWidth;
        if (c < cols) yr[c] = v[k] * inv;
      }
      if constexpr (kMode == Forward::Xent)
        if (lane == 0) xent_row_loss(xr, labels, m, s, r, cols, loss, bad_row);
    }
  }
}

// A block per row for wide rows: max, sum of exp, write (the re-reads of a row hit L2).
template <typename T, typename L, Forward kMode>
__global__ void __launch_bounds__(kRowKernelThreads)
    forward_row_kernel(const T* __restrict__ x, const L* __restrict__ labels, T* __restrict__ y,
                       T* __restrict__ loss, int64_t rows, int64_t cols, int64_t* __restrict__ bad_row) {
  __shared__ T scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    T m = -static_cast<T>(INFINITY);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = max_(m, xr[c]);
    m = block_reduce<T, true>(m, scratch);
    T s = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += exp_(xr[c] - m);
    s = block_reduce<T, false>(s, scratch);
    if constexpr (kMode == Forward::LogSoftmax) {
      const T log_s = log_(s);
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (xr[c] - m) - log_s;
    } else {
      const T inv = T(1) / s;
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = exp_(xr[c] - m) * inv;
      if constexpr (kMode == Forward::Xent)
        if (threadIdx.x == 0) xent_row_loss(xr, labels, m, s, r, cols, loss, bad_row);
    }
  }
}

// softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy).
template <typename T, Backward kMode, int kWidth, int kPerLane>
__global__ void __launch_bounds__(kWarpKernelThreads)
    backward_warp_kernel(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx, int64_t rows,
                         int64_t cols) {
  constexpr int kRowsPerBlock = kWarpKernelThreads / kWidth;
  const int lane = threadIdx.x % kWidth;
  const int group = threadIdx.x / kWidth;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t r = base + group;
    const bool active = r < rows;
    T yv[kPerLane], dyv[kPerLane];
    T s = 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int64_t c = lane + k * kWidth;
      const bool in = active && c < cols;
      yv[k] = in ? y[r * cols + c] : T(0);
      dyv[k] = in ? dy[r * cols + c] : T(0);
      s += kMode == Backward::Softmax ? dyv[k] * yv[k] : dyv[k];
    }
    s = group_sum<kWidth>(s);
    if (!active) continue;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int64_t c = lane + k * kWidth;
      if (c < cols)
        dx[r * cols + c] = kMode == Backward::Softmax ? yv[k] * (dyv[k] - s) : dyv[k] - exp_(yv[k]) * s;
    }
  }
}

template <typename T, Backward kMode>
__global__ void __launch_bounds__(kRowKernelThreads)
    backward_row_kernel(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx, int64_t rows,
                        int64_t cols) {
  __shared__ T scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * cols;
    const T* dyr = dy + r * cols;
    T* dxr = dx + r * cols;
    T s = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += kMode == Backward::Softmax ? dyr[c] * yr[c] : dyr[c];
    s = block_reduce<T, false>(s, scratch);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      dxr[c] = kMode == Backward::Softmax ? yr[c] * (dyr[c] - s) : dyr[c] - exp_(yr[c]) * s;
  }
}

// grad = (probs - onehot(label)) * grad_scale; a bad label matches no column, so nothing is read or
// written out of bounds (the forward already flagged the row).
template <typename T, typename L>
__global__ void xent_backward_kernel(const T* __restrict__ probs, const L* __restrict__ labels, T grad_scale,
                                     T* __restrict__ grad, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    const T onehot = c == static_cast<int64_t>(labels[r]) ? T(1) : T(0);
    grad[i] = (probs[i] - onehot) * grad_scale;
  }
}

// Picks the group width (next power of two of cols, at most 32) and the registers per lane, then
// calls launch(width, per_lane) with both as compile-time constants.
template <typename Launch> void dispatch_warp_shape(int64_t cols, Launch&& launch) {
  using std::integral_constant;
  if (cols <= 1) return launch(integral_constant<int, 1>{}, integral_constant<int, 1>{});
  if (cols <= 2) return launch(integral_constant<int, 2>{}, integral_constant<int, 1>{});
  if (cols <= 4) return launch(integral_constant<int, 4>{}, integral_constant<int, 1>{});
  if (cols <= 8) return launch(integral_constant<int, 8>{}, integral_constant<int, 1>{});
  if (cols <= 16) return launch(integral_constant<int, 16>{}, integral_constant<int, 1>{});
  if (cols <= 32) return launch(integral_constant<int, 32>{}, integral_constant<int, 1>{});
  if (cols <= 64) return launch(integral_constant<int, 32>{}, integral_constant<int, 2>{});
  if (cols <= 128) return launch(integral_constant<int, 32>{}, integral_constant<int, 4>{});
  if (cols <= 256) return launch(integral_constant<int, 32>{}, integral_constant<int, 8>{});
  if (cols <= 512) return launch(integral_constant<int, 32>{}, integral_constant<int, 16>{});
  return launch(integral_constant<int, 32>{}, integral_constant<int, 32>{});
}

template <Forward kMode, typename T, typename L>
void launch_forward(const T* x, const L* labels, T* y, T* loss, int64_t rows, int64_t cols, int64_t* bad_row,
                    Stream stream) {
  if (rows <= 0) return;
  EMBER_CHECK(cols > 0, ValueError, "softmax over rows with no columns (", rows, " rows, 0 columns)");
  if (cols > kMaxWarpCols) {
    launch_kernel<forward_row_kernel<T, L, kMode>>(grid_for(rows, 1), kRowKernelThreads, 0, stream, x, labels, y, loss,
                                                   rows, cols, bad_row);
    EMBER_LAUNCH_CHECK("forward_row_kernel");
    return;
  }
  dispatch_warp_shape(cols, [&](auto width, auto per_lane) {
    constexpr int kWidth = decltype(width)::value, kPerLane = decltype(per_lane)::value;
    const unsigned grid = grid_for(rows, kWarpKernelThreads / kWidth);
    launch_kernel<forward_warp_kernel<T, L, kMode, kWidth, kPerLane>>(grid, kWarpKernelThreads, 0, stream, x, labels, y,
                                                                      loss, rows, cols, bad_row);
    EMBER_LAUNCH_CHECK("forward_warp_kernel");
  });
}

template <Backward kMode, typename T>
void launch_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols, Stream stream) {
  if (rows <= 0 || cols <= 0) return;
  if (cols > kMaxWarpCols) {
    launch_kernel<backward_row_kernel<T, kMode>>(grid_for(rows, 1), kRowKernelThreads, 0, stream, y, dy, dx, rows,
                                                 cols);
    EMBER_LAUNCH_CHECK("backward_row_kernel");
    return;
  }
  dispatch_warp_shape(cols, [&](auto width, auto per_lane) {
    constexpr int kWidth = decltype(width)::value, kPerLane = decltype(per_lane)::value;
    const unsigned grid = grid_for(rows, kWarpKernelThreads / kWidth);
    launch_kernel<backward_warp_kernel<T, kMode, kWidth, kPerLane>>(grid, kWarpKernelThreads, 0, stream, y, dy, dx,
                                                                    rows, cols);
    EMBER_LAUNCH_CHECK("backward_warp_kernel");
  });
}

}  // namespace

template <typename T> void softmax(const T* x, T* y, int64_t rows, int64_t cols, Stream stream) {
  launch_forward<Forward::Softmax, T, int64_t>(x, nullptr, y, nullptr, rows, cols, nullptr, stream);
}

template <typename T> void log_softmax(const T* x, T* y, int64_t rows, int64_t cols, Stream stream) {
  launch_forward<Forward::LogSoftmax, T, int64_t>(x, nullptr, y, nullptr, rows, cols, nullptr, stream);
}

template <typename T> void softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols, Stream stream) {
  launch_backward<Backward::Softmax>(y, dy, dx, rows, cols, stream);
}

template <typename T>
void log_softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols, Stream stream) {
  launch_backward<Backward::LogSoftmax>(y, dy, dx, rows, cols, stream);
}

template <typename T, typename L>
void softmax_xent_forward(const T* logits, const L* labels, T* probs, T* row_loss, int64_t rows, int64_t cols,
                          int64_t* bad_row, Stream stream) {
  EMBER_ASSERT(bad_row != nullptr, "softmax_xent_forward needs a bad_row flag");
  launch_forward<Forward::Xent>(logits, labels, probs, row_loss, rows, cols, bad_row, stream);
}

template <typename T, typename L>
void softmax_xent_backward(const T* probs, const L* labels, T grad_scale, T* grad_logits, int64_t rows, int64_t cols,
                           Stream stream) {
  if (rows <= 0 || cols <= 0) return;
  launch_kernel<xent_backward_kernel<T, L>>(grid_for(rows * cols, kElementwiseThreads), kElementwiseThreads, 0, stream,
                                            probs, labels, grad_scale, grad_logits, rows, cols);
  EMBER_LAUNCH_CHECK("xent_backward_kernel");
}

#define EMBER_SOFTMAX_CUDA(T)                                                                                   \
  template void softmax<T>(const T*, T*, int64_t, int64_t, Stream);                                             \
  template void log_softmax<T>(const T*, T*, int64_t, int64_t, Stream);                                         \
  template void softmax_backward<T>(const T*, const T*, T*, int64_t, int64_t, Stream);                          \
  template void log_softmax_backward<T>(const T*, const T*, T*, int64_t, int64_t, Stream);                      \
  template void softmax_xent_forward<T, int32_t>(const T*, const int32_t*, T*, T*, int64_t, int64_t, int64_t*,  \
                                                 Stream);                                                       \
  template void softmax_xent_forward<T, int64_t>(const T*, const int64_t*, T*, T*, int64_t, int64_t, int64_t*,  \
                                                 Stream);                                                       \
  template void softmax_xent_backward<T, int32_t>(const T*, const int32_t*, T, T*, int64_t, int64_t, Stream);   \
  template void softmax_xent_backward<T, int64_t>(const T*, const int64_t*, T, T*, int64_t, int64_t, Stream);
EMBER_SOFTMAX_CUDA(float)
EMBER_SOFTMAX_CUDA(double)
#undef EMBER_SOFTMAX_CUDA

}  // namespace ember::kernels::cuda
