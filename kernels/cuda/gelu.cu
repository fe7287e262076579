// CUDA GELU forward and backward: grid-stride loops over contiguous arrays, the form a template parameter so
// each kernel holds one formula (the per-element math is kernels/gelu.h's, shared with the CPU twin).
#include <cuda_runtime.h>

#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/gelu.h"

namespace ember::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T, GeluApproximate kForm>
__global__ void forward_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = gelu_math::forward(x[i], kForm);
}

template <typename T, GeluApproximate kForm>
__global__ void backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ x, T* __restrict__ grad_in,
                                int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    grad_in[i] = grad_out[i] * gelu_math::derivative(x[i], kForm);
}

}  // namespace

template <typename T> void gelu(const T* x, T* out, int64_t n, GeluApproximate approximate, Stream stream) {
  if (n <= 0) return;
  if (approximate == GeluApproximate::Tanh)
    launch_kernel<forward_kernel<T, GeluApproximate::Tanh>>(grid_for(n, kThreads), kThreads, 0, stream, x, out, n);
  else
    launch_kernel<forward_kernel<T, GeluApproximate::None>>(grid_for(n, kThreads), kThreads, 0, stream, x, out, n);
  EMBER_LAUNCH_CHECK("gelu forward_kernel");
}

template <typename T>
void gelu_backward(const T* grad_out, const T* x, T* grad_in, int64_t n, GeluApproximate approximate, Stream stream) {
  if (n <= 0) return;
  if (approximate == GeluApproximate::Tanh)
    launch_kernel<backward_kernel<T, GeluApproximate::Tanh>>(grid_for(n, kThreads), kThreads, 0, stream, grad_out, x,
                                                             grad_in, n);
  else
    launch_kernel<backward_kernel<T, GeluApproximate::None>>(grid_for(n, kThreads), kThreads, 0, stream, grad_out, x,
                                                             grad_in, n);
  EMBER_LAUNCH_CHECK("gelu backward_kernel");
}

template void gelu<float>(const float*, float*, int64_t, GeluApproximate, Stream);
template void gelu<double>(const double*, double*, int64_t, GeluApproximate, Stream);
template void gelu_backward<float>(const float*, const float*, float*, int64_t, GeluApproximate, Stream);
template void gelu_backward<double>(const double*, const double*, double*, int64_t, GeluApproximate, Stream);

}  // namespace ember::kernels::cuda
