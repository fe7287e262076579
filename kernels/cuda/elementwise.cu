// CUDA elementwise kernels: grid-stride loops over contiguous arrays (memory-bound; one pass each).
#include "base/cuda_check.h"
#include "kernels/elementwise.h"
#include "kernels/cuda/launch.cuh"

namespace ember::kernels::cuda {

namespace {

constexpr int kThreads = 256;

// One kernel for every unary/binary map: `op(i)` computes element i, so each op is one line below
// and all share the same bounds-checked grid-stride loop.
template <typename Op>
__global__ void map_kernel(int64_t n, Op op) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    op(i);
}

template <typename Op>
void launch_map(int64_t n, Stream stream, Op op, const char* name) {
  if (n <= 0) return;
  launch_kernel<map_kernel<Op>>(grid_for(n, kThreads), kThreads, 0, stream, n, op);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) ::ember::detail::cuda_fail(err, name, __FILE__, __LINE__);
}

}  // namespace

template <typename T>
void fill(T* out, int64_t n, T value, Stream stream) {
  launch_map(n, stream, [=] __device__(int64_t i) { out[i] = value; }, "fill");
}

template <typename T>
void add(const T* a, const T* b, T* out, int64_t n, Stream stream) {
  launch_map(n, stream, [=] __device__(int64_t i) { out[i] = a[i] + b[i]; }, "add");
}

template <typename T>
void sub(const T* a, const T* b, T* out, int64_t n, Stream stream) {
  launch_map(n, stream, [=] __device__(int64_t i) { out[i] = a[i] - b[i]; }, "sub");
}

template <typename T>
void mul(const T* a, const T* b, T* out, int64_t n, Stream stream) {
  launch_map(n, stream, [=] __device__(int64_t i) { out[i] = a[i] * b[i]; }, "mul");
}

template <typename T>
void scale(const T* a, T alpha, T* out, int64_t n, Stream stream) {
  launch_map(n, stream, [=] __device__(int64_t i) { out[i] = alpha * a[i]; }, "scale");
}

template <typename T>
void axpy(T alpha, const T* x, T* y, int64_t n, Stream stream) {
  launch_map(n, stream, [=] __device__(int64_t i) { y[i] += alpha * x[i]; }, "axpy");
}

template <typename T>
void add_bias(const T* x, const T* bias, T* out, int64_t rows, int64_t cols, Stream stream) {
  launch_map(rows * cols, stream, [=] __device__(int64_t i) { out[i] = x[i] + bias[i % cols]; }, "add_bias");
}

template <typename T>
void relu(const T* x, T* out, int64_t n, Stream stream) {
  launch_map(n, stream, [=] __device__(int64_t i) { out[i] = x[i] > T(0) ? x[i] : T(0); }, "relu");
}

template <typename T>
void relu_backward(const T* grad_out, const T* y, T* grad_in, int64_t n, Stream stream) {
  launch_map(n, stream, [=] __device__(int64_t i) { grad_in[i] = y[i] > T(0) ? grad_out[i] : T(0); },
             "relu_backward");
}

#define EMBER_INSTANTIATE(T)                                                        \
  template void fill<T>(T*, int64_t, T, Stream);                                    \
  template void add<T>(const T*, const T*, T*, int64_t, Stream);                    \
  template void sub<T>(const T*, const T*, T*, int64_t, Stream);                    \
  template void mul<T>(const T*, const T*, T*, int64_t, Stream);                    \
  template void scale<T>(const T*, T, T*, int64_t, Stream);                         \
  template void axpy<T>(T, const T*, T*, int64_t, Stream);                          \
  template void add_bias<T>(const T*, const T*, T*, int64_t, int64_t, Stream);      \
  template void relu<T>(const T*, T*, int64_t, Stream);                             \
  template void relu_backward<T>(const T*, const T*, T*, int64_t, Stream);
EMBER_INSTANTIATE(float)
EMBER_INSTANTIATE(double)
#undef EMBER_INSTANTIATE

template void fill<int32_t>(int32_t*, int64_t, int32_t, Stream);
template void fill<int64_t>(int64_t*, int64_t, int64_t, Stream);
template void fill<uint8_t>(uint8_t*, int64_t, uint8_t, Stream);

}  // namespace ember::kernels::cuda
