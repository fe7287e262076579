// What every kernel family shares: the stream handle type, the grid-size helper, and the marker for
// small functions both twins call (compiled for host and device under nvcc, plain inline under g++).
#pragma once

#include <algorithm>
#include <cstdint>

#ifdef __CUDACC__
#define EMBER_HOST_DEVICE __host__ __device__
#else
#define EMBER_HOST_DEVICE
#endif

// cudaStream_t is `CUstream_st*`; naming it here keeps CUDA headers out of host-only code.
struct CUstream_st;

namespace ember::kernels {

using Stream = CUstream_st*;  // nullptr = the legacy default stream

// Blocks for a grid-stride loop over n elements: enough to fill the GPU, capped so
// huge n still launches (the loop covers the rest).
inline unsigned grid_for(int64_t n, int threads, int64_t max_blocks = 65536) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, max_blocks));
}

}  // namespace ember::kernels
