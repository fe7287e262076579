// Kernels for the emulator's own tests (tests/emu/kernels.cu): some correct, exercising each part of the
// execution model, some broken on purpose, each in the one way the emulator must report.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace emu_test {

// Correct kernels. Each launches on `stream` and returns cudaGetLastError().
cudaError_t reverse_in_block(const int* in, int* out, int n, cudaStream_t stream);          // shared memory + barrier
cudaError_t block_sums(const float* in, float* out, int n, int blocks, cudaStream_t stream);  // xor-shuffle tree
cudaError_t shuffles(const int* in, int* out, int kind, int arg, int width, cudaStream_t stream);  // one warp
cudaError_t votes(const int* predicate, unsigned* ballot, int* any, int* all, cudaStream_t stream);  // one warp
cudaError_t barrier_votes(const int* predicate, int* count, int* any, int* all, int n, cudaStream_t stream);
cudaError_t indices_3d(uint32_t* out, dim3 grid, dim3 block, cudaStream_t stream);
cudaError_t count_atomically(unsigned long long* counter, float* sum, int blocks, int threads, cudaStream_t stream);
cudaError_t add_one(float* x, int n, cudaStream_t stream);
cudaError_t bounded_256(float* x, int threads, cudaStream_t stream);  // __launch_bounds__(256)

// Broken kernels, one rule each.
enum class Bug {
  ExitBeforeBarrier,   // one thread returns before a __syncthreads the others reach
  DifferentBarriers,   // even and odd threads wait at different __syncthreads
  MaskWithoutCaller,   // a lane calls __shfl_xor_sync with a mask that leaves it out
  MaskedLaneExits,     // the mask names a lane that has returned
  MaskedLaneMissing,   // half the warp never reaches the shuffle its mask names it in
  ReadsOutsideMask,    // a lane reads (by __shfl_sync) a lane the mask leaves out
  FullMaskPartialWarp, // full mask in a block of 48 threads: lanes 16..31 of warp 1 do not exist
  Trap,                // __trap()
};
cudaError_t broken(Bug bug, int* out, cudaStream_t stream);

}  // namespace emu_test
