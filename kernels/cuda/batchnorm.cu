// CUDA batch normalisation: a block per channel computes its statistics with fixed-order double sums and
// then writes the channel (training forward, backward); eval mode is one elementwise pass.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/batchnorm.h"
#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/launch.cuh"

namespace ember::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

// Element i of channel c's (N, HW) slice, i in [0, N * HW).
__device__ inline int64_t channel_index(const BatchNormGeometry& g, int64_t c, int64_t i) {
  const int64_t n = i / g.HW;
  return (n * g.C + c) * g.HW + (i - n * g.HW);
}

template <typename T> __device__ inline T affine(T v, T scale, T shift, bool relu) {
  const T y = v * scale + shift;
  return relu && y < T(0) ? T(0) : y;
}

// Two passes per channel (mean, then the squared deviations), the running statistics, then y.
template <typename T>
__global__ void __launch_bounds__(kThreads) forward_train_kernel(const BatchNormGeometry g, const BatchNormTrainArgs<T> a) {
  __shared__ double scratch[32];
  const int64_t M = g.N * g.HW;
  for (int64_t c = blockIdx.x; c < g.C; c += gridDim.x) {
    double s = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) s += static_cast<double>(a.x[channel_index(g, c, i)]);
    const double mean = block_sum(s, scratch) / static_cast<double>(M);
    double q = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      const double d = static_cast<double>(a.x[channel_index(g, c, i)]) - mean;
      q += d * d;
    }
    const double var = block_sum(q, scratch) / static_cast<double>(M);
    const double invstd = 1.0 / sqrt(var + static_cast<double>(a.eps));
    if (threadIdx.x == 0) {
      a.save_mean[c] = static_cast<T>(mean);
      a.save_invstd[c] = static_cast<T>(invstd);
      if (a.running_mean != nullptr) {
        const double m = static_cast<double>(a.momentum), unbiased = var * static_cast<double>(M) / static_cast<double>(M - 1);
        a.running_mean[c] = static_cast<T>((1 - m) * static_cast<double>(a.running_mean[c]) + m * mean);
        a.running_var[c] = static_cast<T>((1 - m) * static_cast<double>(a.running_var[c]) + m * unbiased);
      }
      if (c == 0 && a.num_batches_tracked != nullptr) ++*a.num_batches_tracked;
    }
    const double w = a.weight != nullptr ? static_cast<double>(a.weight[c]) : 1.0;
    const double b = a.bias != nullptr ? static_cast<double>(a.bias[c]) : 0.0;
    const T scale = static_cast<T>(w * invstd), shift = static_cast<T>(b - mean * w * invstd);
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      const int64_t k = channel_index(g, c, i);
      a.y[k] = affine(a.x[k], scale, shift, a.relu);
    }
  }
}

template <typename T>
__global__ void forward_eval_kernel(const BatchNormGeometry g, const T* __restrict__ x, const T* __restrict__ weight,
                                    const T* __restrict__ bias, const T* __restrict__ running_mean,
                                    const T* __restrict__ running_var, T eps, bool relu, T* __restrict__ y,
                                    T* __restrict__ save_invstd) {
  const int64_t total = g.N * g.C * g.HW, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total || i < g.C; i += stride) {
    // Threads i < C also save channel i's invstd (not that of the channel element i lies in).
    if (save_invstd != nullptr && i < g.C)
      save_invstd[i] = static_cast<T>(1.0 / sqrt(static_cast<double>(running_var[i]) + static_cast<double>(eps)));
    if (i >= total) continue;
    const int64_t c = (i / g.HW) % g.C;
    const double invstd = 1.0 / sqrt(static_cast<double>(running_var[c]) + static_cast<double>(eps));
    const double w = weight != nullptr ? static_cast<double>(weight[c]) : 1.0;
    const double b = bias != nullptr ? static_cast<double>(bias[c]) : 0.0;
    const double mean = static_cast<double>(running_mean[c]);
    y[i] = affine(x[i], static_cast<T>(w * invstd), static_cast<T>(b - mean * w * invstd), relu);
  }
}

// Per channel: sum(g) and sum(g * xhat) (g = dy under the ReLU mask), the parameter gradients, then dx.
template <typename T>
__global__ void __launch_bounds__(kThreads) backward_kernel(const BatchNormGeometry g, const BatchNormBackwardArgs<T> a) {
  __shared__ double scratch[32];
  const int64_t M = g.N * g.HW;
  for (int64_t c = blockIdx.x; c < g.C; c += gridDim.x) {
    const T mean = a.mean[c], invstd = a.invstd[c];
    double sg = 0, sgx = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      const int64_t k = channel_index(g, c, i);
      const T gi = a.relu_output == nullptr || a.relu_output[k] > T(0) ? a.dy[k] : T(0);
      sg += static_cast<double>(gi);
      sgx += static_cast<double>(gi) * static_cast<double>((a.x[k] - mean) * invstd);
    }
    sg = block_sum(sg, scratch);
    sgx = block_sum(sgx, scratch);
    if (threadIdx.x == 0) {
      if (a.dweight != nullptr) a.dweight[c] += static_cast<T>(sgx);
      if (a.dbias != nullptr) a.dbias[c] += static_cast<T>(sg);
    }
    const T scale = (a.weight != nullptr ? a.weight[c] : T(1)) * invstd;
    const T mean_g = a.batch_stats ? static_cast<T>(sg / static_cast<double>(M)) : T(0);
    const T mean_gx = a.batch_stats ? static_cast<T>(sgx / static_cast<double>(M)) : T(0);
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      const int64_t k = channel_index(g, c, i);
      const T gi = a.relu_output == nullptr || a.relu_output[k] > T(0) ? a.dy[k] : T(0);
      a.dx[k] = scale * (gi - mean_g - (a.x[k] - mean) * invstd * mean_gx);
    }
  }
}

unsigned channel_blocks(int64_t C) { return static_cast<unsigned>(C < kMaxBlocks ? C : kMaxBlocks); }

}  // namespace

template <typename T>
void batch_norm_forward_train(const BatchNormGeometry& g, const BatchNormTrainArgs<T>& a, Stream stream) {
  detail::check_batch_norm("cuda::batch_norm_forward_train", g, true, static_cast<double>(a.eps));
  launch_kernel<forward_train_kernel<T>>(channel_blocks(g.C), kThreads, 0, stream, g, a);
  EMBER_LAUNCH_CHECK("forward_train_kernel");
}

template <typename T>
void batch_norm_forward_eval(const BatchNormGeometry& g, const T* x, const T* weight, const T* bias,
                             const T* running_mean, const T* running_var, T eps, bool relu, T* y, T* save_invstd,
                             Stream stream) {
  detail::check_batch_norm("cuda::batch_norm_forward_eval", g, false, static_cast<double>(eps));
  const int64_t n = g.N * g.C * g.HW > g.C ? g.N * g.C * g.HW : g.C;
  launch_kernel<forward_eval_kernel<T>>(grid_for(n, kThreads), kThreads, 0, stream, g, x, weight, bias, running_mean,
                                        running_var, eps, relu, y, save_invstd);
  EMBER_LAUNCH_CHECK("forward_eval_kernel");
}

template <typename T>
void batch_norm_backward(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a, Stream stream) {
  detail::check_batch_norm("cuda::batch_norm_backward", g, a.batch_stats, 1.0);
  launch_kernel<backward_kernel<T>>(channel_blocks(g.C), kThreads, 0, stream, g, a);
  EMBER_LAUNCH_CHECK("backward_kernel");
}

#define EMBER_INSTANTIATE_BATCHNORM_CUDA(T)                                                                    \
  template void batch_norm_forward_train<T>(const BatchNormGeometry&, const BatchNormTrainArgs<T>&, Stream);   \
  template void batch_norm_forward_eval<T>(const BatchNormGeometry&, const T*, const T*, const T*, const T*,   \
                                           const T*, T, bool, T*, T*, Stream);                                 \
  template void batch_norm_backward<T>(const BatchNormGeometry&, const BatchNormBackwardArgs<T>&, Stream);
EMBER_INSTANTIATE_BATCHNORM_CUDA(float)
EMBER_INSTANTIATE_BATCHNORM_CUDA(double)
#undef EMBER_INSTANTIATE_BATCHNORM_CUDA

}  // namespace ember::kernels::cuda
