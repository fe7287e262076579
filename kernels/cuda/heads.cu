// CUDA split and merge of attention heads: one grid-stride kernel over the contiguous (parts, B, H, T, D) side, the
// direction a template parameter; index k names (p, b, h, t, d) and so its element of the strided (B, T, F) side.
#include <cuda_runtime.h>

#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/heads.h"

namespace ember::kernels::cuda {

namespace {

constexpr int kThreads = 256;

// The strided side's offset of element k of the contiguous side.
__device__ inline int64_t strided_offset(int64_t k, const HeadsLayout& l) {
  const int64_t d = k % l.head_dim;
  int64_t r = k / l.head_dim;
  const int64_t t = r % l.tokens;
  r /= l.tokens;
  const int64_t h = r % l.heads;
  r /= l.heads;
  const int64_t b = r % l.batch, p = r / l.batch;
  return b * l.batch_stride + t * l.token_stride + (p * l.heads + h) * l.head_dim + d;
}

template <typename T, bool kSplit>
__global__ void __launch_bounds__(kThreads) heads_kernel(const T* __restrict__ x, T* __restrict__ out, HeadsLayout l,
                                                         int64_t total) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (kSplit) out[k] = x[strided_offset(k, l)];
    else out[strided_offset(k, l)] = x[k];
  }
}

template <typename T, bool kSplit> void launch(const T* x, T* out, const HeadsLayout& l, Stream stream) {
  const int64_t total = l.parts * l.batch * l.heads * l.tokens * l.head_dim;
  if (total <= 0) return;
  launch_kernel<heads_kernel<T, kSplit>>(grid_for(total, kThreads), kThreads, 0, stream, x, out, l, total);
  if (kSplit) EMBER_LAUNCH_CHECK("split_heads heads_kernel");
  else EMBER_LAUNCH_CHECK("merge_heads heads_kernel");
}

}  // namespace

template <typename T> void split_heads(const T* x, T* out, const HeadsLayout& layout, Stream stream) {
  launch<T, true>(x, out, layout, stream);
}

template <typename T> void merge_heads(const T* x, T* out, const HeadsLayout& layout, Stream stream) {
  launch<T, false>(x, out, layout, stream);
}

template void split_heads<float>(const float*, float*, const HeadsLayout&, Stream);
template void split_heads<double>(const double*, double*, const HeadsLayout&, Stream);
template void merge_heads<float>(const float*, float*, const HeadsLayout&, Stream);
template void merge_heads<double>(const double*, double*, const HeadsLayout&, Stream);

}  // namespace ember::kernels::cuda
