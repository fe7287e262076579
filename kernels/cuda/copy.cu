// CUDA copy kernels: strided gather into contiguous memory, and dtype casts.
#include "base/cuda_check.h"
#include "kernels/copy.h"
#include "kernels/cuda/launch.cuh"

namespace ember::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void strided_copy_kernel(const T* src, StridedLayout layout, T* dst, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, offset = 0;
    for (int d = layout.ndim - 1; d >= 0; --d) {  // unravel i in row-major order
      int64_t size = layout.sizes[d];
      offset += (rest % size) * layout.strides[d];
      rest /= size;
    }
    dst[i] = src[offset];
  }
}

template <typename Src, typename Dst>
__global__ void cast_kernel(const Src* src, Dst* dst, int64_t n, double scale) {
  const bool exact = scale == 1.0;
  const float scale_f = static_cast<float>(scale);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (exact) dst[i] = static_cast<Dst>(src[i]);
    else if (sizeof(Src) <= 4 && sizeof(Dst) <= 4) dst[i] = static_cast<Dst>(static_cast<float>(src[i]) * scale_f);
    else dst[i] = static_cast<Dst>(static_cast<double>(src[i]) * scale);
  }
}

}  // namespace

template <typename T>
void strided_copy(const T* src, StridedLayout layout, T* dst, int64_t n, Stream stream) {
  if (n <= 0) return;
  launch_kernel<strided_copy_kernel<T>>(grid_for(n, kThreads), kThreads, 0, stream, src, layout, dst, n);
  EMBER_LAUNCH_CHECK("strided_copy_kernel");
}

template <typename Src, typename Dst>
void cast(const Src* src, Dst* dst, int64_t n, double scale, Stream stream) {
  if (n <= 0) return;
  launch_kernel<cast_kernel<Src, Dst>>(grid_for(n, kThreads), kThreads, 0, stream, src, dst, n, scale);
  EMBER_LAUNCH_CHECK("cast_kernel");
}

#define EMBER_STRIDED(T) template void strided_copy<T>(const T*, StridedLayout, T*, int64_t, Stream);
EMBER_STRIDED(float)
EMBER_STRIDED(double)
EMBER_STRIDED(int32_t)
EMBER_STRIDED(int64_t)
EMBER_STRIDED(uint8_t)
#undef EMBER_STRIDED

#define EMBER_CAST(S, D) template void cast<S, D>(const S*, D*, int64_t, double, Stream);
#define EMBER_CAST_FROM(S) \
  EMBER_CAST(S, float) EMBER_CAST(S, double) EMBER_CAST(S, int32_t) EMBER_CAST(S, int64_t) EMBER_CAST(S, uint8_t)
EMBER_CAST_FROM(float)
EMBER_CAST_FROM(double)
EMBER_CAST_FROM(int32_t)
EMBER_CAST_FROM(int64_t)
EMBER_CAST_FROM(uint8_t)
#undef EMBER_CAST_FROM
#undef EMBER_CAST

}  // namespace ember::kernels::cuda
