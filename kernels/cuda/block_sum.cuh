// A block-wide sum in a fixed order (a xor tree within each warp, then the same tree over the warps), for
// the per-channel reductions of the CNN kernels. Deterministic: the order depends only on blockDim.
#pragma once

#include <cuda_runtime.h>

namespace ember::kernels::cuda {

// Every thread of the block must call it; the result is valid in every thread. `scratch` holds 32 values;
// the leading barrier lets a block call it back to back on the same scratch.
template <typename Acc> __device__ inline Acc block_sum(Acc v, Acc* scratch) {
  constexpr unsigned kFullMask = 0xffffffffu;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : Acc(0);
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

}  // namespace ember::kernels::cuda
