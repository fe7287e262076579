// CUDA_CHECK and the kernel-launch check: every CUDA runtime call and launch goes through these.
// Only included by code compiled with the CUDA backend (kernels/cuda, core's runtime glue).
#pragma once

#include <cuda_runtime.h>

#include "base/error.h"

namespace ember::detail {

[[noreturn]] inline void cuda_fail(cudaError_t err, const char* what, const char* file, int line) {
  cudaGetLastError();  // clear a sticky-free error so the next call starts clean
  throw CudaError(concat("CUDA error at ", file, ":", line, ": ", what, " returned ", cudaGetErrorName(err),
                         " (", cudaGetErrorString(err), ")"));
}

}  // namespace ember::detail

#define CUDA_CHECK(expr)                                                                   \
  do {                                                                                     \
    cudaError_t ember_cuda_err_ = (expr);                                                  \
    if (ember_cuda_err_ != cudaSuccess) ::ember::detail::cuda_fail(ember_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After every launch_kernel (kernels/cuda/launch.cuh): catches bad launch configurations at once (does not synchronise).
#define EMBER_LAUNCH_CHECK(kernel_name)                                                      \
  do {                                                                                     \
    cudaError_t ember_cuda_err_ = cudaGetLastError();                                      \
    if (ember_cuda_err_ != cudaSuccess)                                                    \
      ::ember::detail::cuda_fail(ember_cuda_err_, "launch of " kernel_name, __FILE__, __LINE__); \
  } while (0)
