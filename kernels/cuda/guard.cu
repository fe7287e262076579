// The non-finite guard on the GPU: one launch for all of a step's tensors; the last block to finish
// closes the step, so nothing waits on the host.
#include <cmath>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/guard.h"
#include "kernels/cuda/launch.cuh"

namespace ember::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocksPerTensor = 32;  // a step's gradients are small; 32 x 256 threads saturate the scan

// blockIdx.y picks the tensor, blockIdx.x strides over it. Each block ORs its tensor's bit into state->mask;
// the last block of the grid to finish (threadfence-reduction pattern) takes the mask, resets the scratch
// for the next step, and writes skip/skipped for the optimizer kernels that follow on the stream.
template <typename T>
__global__ void check_finite_kernel(GuardTensors<T> list, int64_t step, bool sticky, GuardState* state,
                                    GuardReport* report) {
  const int t = blockIdx.y;
  const T* x = list.data[t];
  const int64_t n = list.numel[t];
  bool bad = false;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    bad |= !isfinite(x[i]);
  const bool block_bad = __syncthreads_or(bad) != 0;
  if (threadIdx.x != 0) return;
  if (block_bad) atomicOr(reinterpret_cast<unsigned long long*>(&state->mask), guard_bit(t));
  __threadfence();  // this block's mask bit is visible before its ticket is
  const unsigned total = gridDim.x * gridDim.y;
  if (atomicAdd(&state->blocks_done, 1u) != total - 1) return;
  const uint64_t mask = atomicExch(reinterpret_cast<unsigned long long*>(&state->mask), 0ull);
  state->blocks_done = 0;
  guard_finish(*state, *report, mask, step, sticky);
  __threadfence_system();  // the report reaches host memory before the stream moves on
}

}  // namespace

template <typename T>
void check_finite(const GuardTensors<T>& list, int64_t step, bool sticky, GuardState* state, GuardReport* report,
                  Stream stream) {
  detail::check_guard_args(list, step, state, report);
  int64_t longest = 0;
  for (int i = 0; i < list.count; ++i) longest = list.numel[i] > longest ? list.numel[i] : longest;
  // An empty list still launches one block, so the step is closed (skip cleared) like any other.
  GuardTensors<T> launched = list;
  if (launched.count == 0) {
    launched.count = 1;
    launched.data[0] = nullptr;
    launched.numel[0] = 0;
  }
  const dim3 grid(grid_for(longest, kThreads, kMaxBlocksPerTensor), static_cast<unsigned>(launched.count));
  launch_kernel<check_finite_kernel<T>>(grid, kThreads, 0, stream, launched, step, sticky, state, report);
  EMBER_LAUNCH_CHECK("check_finite_kernel");
}

template void check_finite<float>(const GuardTensors<float>&, int64_t, bool, GuardState*, GuardReport*, Stream);
template void check_finite<double>(const GuardTensors<double>&, int64_t, bool, GuardState*, GuardReport*, Stream);

}  // namespace ember::kernels::cuda
