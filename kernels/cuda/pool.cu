// CUDA max pooling: a thread per output window forward; backward a thread per input pixel that gathers
// from the windows covering it (in the host twin's order), so no atomics and bit-identical sums.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/pool.h"

namespace ember::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void max_pool_forward_kernel(const Pool2dGeometry g, int64_t OH, int64_t OW, const T* __restrict__ x,
                                        T* __restrict__ y, int32_t* __restrict__ argmax) {
  const int64_t total = g.N * g.C * OH * OW, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t plane = i / (OH * OW), p = i - plane * OH * OW, oh = p / OW, ow = p - oh * OW;
    const int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
    const int64_t h_lo = h0 > 0 ? h0 : 0, h_hi = h0 + g.KH < g.H ? h0 + g.KH : g.H;
    const int64_t w_lo = w0 > 0 ? w0 : 0, w_hi = w0 + g.KW < g.W ? w0 + g.KW : g.W;
    const T* in = x + plane * g.H * g.W;
    T best = -static_cast<T>(INFINITY);
    int64_t where = h_lo * g.W + w_lo;
    bool found_nan = false;
    for (int64_t h = h_lo; h < h_hi && !found_nan; ++h)
      for (int64_t w = w_lo; w < w_hi; ++w) {
        const T v = in[h * g.W + w];
        if (isnan(v) || v > best) {  // the first NaN wins the window; otherwise the first of equal maxima
          best = v;
          where = h * g.W + w;
          if (isnan(v)) {
            found_nan = true;
            break;
          }
        }
      }
    y[i] = best;
    argmax[i] = static_cast<int32_t>(where);
  }
}

// The windows covering input row ih are oh in [ceil((ih + pad - K + 1) / stride), floor((ih + pad) / stride)].
__device__ inline void covering(int64_t i, int64_t pad, int64_t k, int64_t stride, int64_t out, int64_t* lo,
                                int64_t* hi) {
  const int64_t top = i + pad - k + 1;
  *lo = top <= 0 ? 0 : (top + stride - 1) / stride;
  const int64_t last = (i + pad) / stride;
  *hi = last < out - 1 ? last : out - 1;
}

template <typename T>
__global__ void max_pool_backward_kernel(const Pool2dGeometry g, int64_t OH, int64_t OW, const T* __restrict__ dy,
                                         const int32_t* __restrict__ argmax, T* __restrict__ dx) {
  const int64_t HW = g.H * g.W, total = g.N * g.C * HW, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t plane = i / HW, pix = i - plane * HW, ih = pix / g.W, iw = pix - ih * g.W;
    int64_t oh_lo, oh_hi, ow_lo, ow_hi;
    covering(ih, g.pad_h, g.KH, g.stride_h, OH, &oh_lo, &oh_hi);
    covering(iw, g.pad_w, g.KW, g.stride_w, OW, &ow_lo, &ow_hi);
    const int64_t base = plane * OH * OW;
    T s = 0;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh)
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow)
        if (argmax[base + oh * OW + ow] == pix) s += dy[base + oh * OW + ow];
    dx[i] = s;
  }
}

}  // namespace

template <typename T>
void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, int32_t* argmax, Stream stream) {
  detail::check_pool2d_geometry("cuda::max_pool2d_forward", g);
  const int64_t n = g.N * g.C * g.OH() * g.OW();
  if (n == 0) return;
  launch_kernel<max_pool_forward_kernel<T>>(grid_for(n, kThreads), kThreads, 0, stream, g, g.OH(), g.OW(), x, y, argmax);
  EMBER_LAUNCH_CHECK("max_pool_forward_kernel");
}

template <typename T>
void max_pool2d_backward(const Pool2dGeometry& g, const T* dy, const int32_t* argmax, T* dx, Stream stream) {
  detail::check_pool2d_geometry("cuda::max_pool2d_backward", g);
  const int64_t n = g.N * g.C * g.H * g.W;
  if (n == 0) return;
  launch_kernel<max_pool_backward_kernel<T>>(grid_for(n, kThreads), kThreads, 0, stream, g, g.OH(), g.OW(), dy, argmax,
                                             dx);
  EMBER_LAUNCH_CHECK("max_pool_backward_kernel");
}

#define EMBER_INSTANTIATE_POOL_CUDA(T)                                                                     \
  template void max_pool2d_forward<T>(const Pool2dGeometry&, const T*, T*, int32_t*, Stream);              \
  template void max_pool2d_backward<T>(const Pool2dGeometry&, const T*, const int32_t*, T*, Stream);
EMBER_INSTANTIATE_POOL_CUDA(float)
EMBER_INSTANTIATE_POOL_CUDA(double)
#undef EMBER_INSTANTIATE_POOL_CUDA

}  // namespace ember::kernels::cuda
