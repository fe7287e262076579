// CUDA random kernels: the same Philox stream as the CPU twins, one value per thread.
#include "base/cuda_check.h"
#include "kernels/philox.h"
#include "kernels/random.h"
#include "kernels/cuda/launch.cuh"

namespace ember::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__device__ T uniform01(uint64_t seed, uint64_t i) {
  if constexpr (sizeof(T) == 4) return uniform_float(philox_word(seed, i));
  else return uniform_double(philox_word(seed, i));
}

// low + span * u without FMA contraction, so results match the CPU twin bit for bit.
__device__ float affine_rn(float low, float span, float u) { return __fadd_rn(low, __fmul_rn(span, u)); }
__device__ double affine_rn(double low, double span, double u) { return __dadd_rn(low, __dmul_rn(span, u)); }

template <typename T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, T low, T high) {
  const T span = high - low;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = affine_rn(low, span, uniform01<T>(seed, offset + static_cast<uint64_t>(i)));
}

template <typename T>
__global__ void normal_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, T mean, T std) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint64_t k = offset + 2 * static_cast<uint64_t>(i);
    double u1 = 1.0 - uniform_double(philox_word(seed, k));
    double u2 = uniform_double(philox_word(seed, k + 1));
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    out[i] = static_cast<T>(mean + std * z);
  }
}

template <typename T>
__global__ void dropout_mask_kernel(T* mask, int64_t n, uint64_t seed, uint64_t offset, T p) {
  const T keep_scale = T(1) / (T(1) - p);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    mask[i] = uniform01<T>(seed, offset + static_cast<uint64_t>(i)) >= p ? keep_scale : T(0);
}

}  // namespace

template <typename T>
void uniform(T* out, int64_t n, uint64_t seed, uint64_t offset, T low, T high, Stream stream) {
  if (n <= 0) return;
  launch_kernel<uniform_kernel<T>>(grid_for(n, kThreads), kThreads, 0, stream, out, n, seed, offset, low, high);
  EMBER_LAUNCH_CHECK("uniform_kernel");
}

template <typename T>
void normal(T* out, int64_t n, uint64_t seed, uint64_t offset, T mean, T std, Stream stream) {
  if (n <= 0) return;
  launch_kernel<normal_kernel<T>>(grid_for(n, kThreads), kThreads, 0, stream, out, n, seed, offset, mean, std);
  EMBER_LAUNCH_CHECK("normal_kernel");
}

template <typename T>
void dropout_mask(T* mask, int64_t n, uint64_t seed, uint64_t offset, T p, Stream stream) {
  if (n <= 0) return;
  launch_kernel<dropout_mask_kernel<T>>(grid_for(n, kThreads), kThreads, 0, stream, mask, n, seed, offset, p);
  EMBER_LAUNCH_CHECK("dropout_mask_kernel");
}

#define EMBER_INSTANTIATE(T)                                                      \
  template void uniform<T>(T*, int64_t, uint64_t, uint64_t, T, T, Stream);        \
  template void normal<T>(T*, int64_t, uint64_t, uint64_t, T, T, Stream);         \
  template void dropout_mask<T>(T*, int64_t, uint64_t, uint64_t, T, Stream);
EMBER_INSTANTIATE(float)
EMBER_INSTANTIATE(double)
#undef EMBER_INSTANTIATE

}  // namespace ember::kernels::cuda
