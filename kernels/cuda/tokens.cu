// CUDA token layout moves: grid-stride loops over the output, each element computed from its index with the
// index math kernels/tokens.h shares with the CPU twin (consecutive threads write consecutive outputs).
#include <cuda_runtime.h>

#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/tokens.h"

namespace ember::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void patchify_kernel(const T* __restrict__ x, T* __restrict__ out, PatchifyArgs a, int64_t n) {
  const T mean = static_cast<T>(a.mean), inv_std = static_cast<T>(1.0 / a.std);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = (x[tokens_math::patch_source(i, a)] - mean) * inv_std;
}

template <typename T>
__global__ void prepend_kernel(const T* __restrict__ x, const T* __restrict__ token, T* __restrict__ out,
                               PrependTokenArgs a, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = tokens_math::prepended(i, x, token, a);
}

}  // namespace

template <typename T> void patchify(const T* x, T* out, const PatchifyArgs& a, Stream stream) {
  const int64_t n = a.batch * a.channels * (a.height / a.patch) * (a.width / a.patch) * a.patch * a.patch;
  if (n <= 0) return;
  launch_kernel<patchify_kernel<T>>(grid_for(n, kThreads), kThreads, 0, stream, x, out, a, n);
  EMBER_LAUNCH_CHECK("patchify_kernel");
}

template <typename T> void prepend_token(const T* x, const T* token, T* out, const PrependTokenArgs& a, Stream stream) {
  const int64_t n = a.batch * (a.tokens + 1) * a.dim;
  if (n <= 0) return;
  launch_kernel<prepend_kernel<T>>(grid_for(n, kThreads), kThreads, 0, stream, x, token, out, a, n);
  EMBER_LAUNCH_CHECK("prepend_kernel");
}

template void patchify<float>(const float*, float*, const PatchifyArgs&, Stream);
template void patchify<double>(const double*, double*, const PatchifyArgs&, Stream);
template void prepend_token<float>(const float*, const float*, float*, const PrependTokenArgs&, Stream);
template void prepend_token<double>(const double*, const double*, double*, const PrependTokenArgs&, Stream);

}  // namespace ember::kernels::cuda
