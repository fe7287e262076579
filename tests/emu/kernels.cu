// Kernels for the emulator's own tests: correct ones for each part of the execution model, and broken ones,
// each breaking exactly one rule the emulator must report.
#include "emu/launch.h"
#include "tests/emu/kernels.h"

namespace emu_test {

namespace {

constexpr unsigned kFull = 0xffffffffu;

__global__ void reverse_kernel(const int* in, int* out, int n) {
  __shared__ int tile[1024];
  const int i = threadIdx.x;
  if (i < n) tile[i] = in[i];
  __syncthreads();
  if (i < n) out[i] = tile[n - 1 - i];
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFull, v, offset);
  return v;
}

// Each block sums its slice: lanes by shuffles, then warps through shared memory.
__global__ void block_sum_kernel(const float* in, float* out, int n) {
  __shared__ float partial[32];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = warp_sum(i < n ? in[i] : 0.0f);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = warp_sum(threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
  }
}

__global__ void shuffle_kernel(const int* in, int* out, int kind, int arg, int width) {
  const int v = in[threadIdx.x];
  int r = 0;
  if (kind == 0) r = __shfl_sync(kFull, v, arg, width);
  if (kind == 1) r = __shfl_up_sync(kFull, v, static_cast<unsigned>(arg), width);
  if (kind == 2) r = __shfl_down_sync(kFull, v, static_cast<unsigned>(arg), width);
  if (kind == 3) r = __shfl_xor_sync(kFull, v, arg, width);
  out[threadIdx.x] = r;
}

__global__ void vote_kernel(const int* predicate, unsigned* ballot, int* any, int* all) {
  const int p = predicate[threadIdx.x];
  const unsigned b = __ballot_sync(kFull, p);
  const int a = __any_sync(kFull, p), e = __all_sync(kFull, p);
  if (threadIdx.x == 0) {
    *ballot = b;
    *any = a;
    *all = e;
  }
}

__global__ void barrier_vote_kernel(const int* predicate, int* count, int* any, int* all) {
  const int p = predicate[threadIdx.x];
  const int c = __syncthreads_count(p), a = __syncthreads_or(p), e = __syncthreads_and(p);
  if (threadIdx.x == blockDim.x - 1) {
    *count = c;
    *any = a;
    *all = e;
  }
}

__global__ void indices_kernel(uint32_t* out) {
  const uint32_t block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const uint32_t thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const uint32_t per_block = blockDim.x * blockDim.y * blockDim.z;
  // Packs every coordinate so the host can check all six.
  out[block * per_block + thread] = (blockIdx.x << 24) | (blockIdx.y << 20) | (blockIdx.z << 16) |
                                    (threadIdx.x << 8) | (threadIdx.y << 4) | threadIdx.z;
}

__global__ void atomic_kernel(unsigned long long* counter, float* sum) {
  __shared__ unsigned block_count;
  if (threadIdx.x == 0) block_count = 0;
  __syncthreads();
  atomicAdd(&block_count, 1u);
  atomicAdd(sum, 0.5f);
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(counter, static_cast<unsigned long long>(block_count));
}

__global__ void add_one_kernel(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

__global__ void __launch_bounds__(256) bounded_kernel(float* x) { x[threadIdx.x] = 1.0f; }

// ---- broken on purpose -------------------------------------------------------------------------------------

__global__ void exit_before_barrier(int* out) {
  if (threadIdx.x == 3) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void different_barriers(int* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void mask_without_caller(int* out) {
  const unsigned mask = threadIdx.x == 5 ? 0x1u : kFull;  // lane 5 leaves itself out
  out[threadIdx.x] = __shfl_xor_sync(mask, static_cast<int>(threadIdx.x), 1);
}

__global__ void masked_lane_exits(int* out) {
  if (threadIdx.x == 31) return;
  out[threadIdx.x] = __shfl_xor_sync(kFull, static_cast<int>(threadIdx.x), 1);
}

__global__ void masked_lane_missing(int* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_xor_sync(kFull, static_cast<int>(threadIdx.x), 1);
  __syncthreads();
}

__global__ void reads_outside_mask(int* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, static_cast<int>(threadIdx.x), 20);
}

__global__ void full_mask_partial_warp(int* out) {
  out[threadIdx.x] = __shfl_xor_sync(kFull, static_cast<int>(threadIdx.x), 1);
}

__global__ void trap_kernel(int* out) {
  if (threadIdx.x == 7) __trap();
  out[threadIdx.x] = 1;
}

}  // namespace

cudaError_t reverse_in_block(const int* in, int* out, int n, cudaStream_t stream) {
  emu::launch<reverse_kernel>(1, n, 0, stream, in, out, n);
  return cudaGetLastError();
}

cudaError_t block_sums(const float* in, float* out, int n, int blocks, cudaStream_t stream) {
  emu::launch<block_sum_kernel>(blocks, (n + blocks - 1) / blocks, 0, stream, in, out, n);
  return cudaGetLastError();
}

cudaError_t shuffles(const int* in, int* out, int kind, int arg, int width, cudaStream_t stream) {
  emu::launch<shuffle_kernel>(1, 32, 0, stream, in, out, kind, arg, width);
  return cudaGetLastError();
}

cudaError_t votes(const int* predicate, unsigned* ballot, int* any, int* all, cudaStream_t stream) {
  emu::launch<vote_kernel>(1, 32, 0, stream, predicate, ballot, any, all);
  return cudaGetLastError();
}

cudaError_t barrier_votes(const int* predicate, int* count, int* any, int* all, int n, cudaStream_t stream) {
  emu::launch<barrier_vote_kernel>(1, n, 0, stream, predicate, count, any, all);
  return cudaGetLastError();
}

cudaError_t indices_3d(uint32_t* out, dim3 grid, dim3 block, cudaStream_t stream) {
  emu::launch<indices_kernel>(grid, block, 0, stream, out);
  return cudaGetLastError();
}

cudaError_t count_atomically(unsigned long long* counter, float* sum, int blocks, int threads, cudaStream_t stream) {
  emu::launch<atomic_kernel>(blocks, threads, 0, stream, counter, sum);
  return cudaGetLastError();
}

cudaError_t add_one(float* x, int n, cudaStream_t stream) {
  emu::launch<add_one_kernel>((n + 127) / 128, 128, 0, stream, x, n);
  return cudaGetLastError();
}

cudaError_t bounded_256(float* x, int threads, cudaStream_t stream) {
  emu::launch<bounded_kernel>(1, threads, 0, stream, x);
  return cudaGetLastError();
}

cudaError_t broken(Bug bug, int* out, cudaStream_t stream) {
  switch (bug) {
    case Bug::ExitBeforeBarrier: emu::launch<exit_before_barrier>(2, 64, 0, stream, out); break;
    case Bug::DifferentBarriers: emu::launch<different_barriers>(1, 64, 0, stream, out); break;
    case Bug::MaskWithoutCaller: emu::launch<mask_without_caller>(1, 32, 0, stream, out); break;
    case Bug::MaskedLaneExits: emu::launch<masked_lane_exits>(1, 32, 0, stream, out); break;
    case Bug::MaskedLaneMissing: emu::launch<masked_lane_missing>(1, 32, 0, stream, out); break;
    case Bug::ReadsOutsideMask: emu::launch<reads_outside_mask>(1, 32, 0, stream, out); break;
    case Bug::FullMaskPartialWarp: emu::launch<full_mask_partial_warp>(1, 48, 0, stream, out); break;
    case Bug::Trap: emu::launch<trap_kernel>(1, 32, 0, stream, out); break;
  }
  return cudaGetLastError();
}

}  // namespace emu_test
