// 2-d max pooling on NCHW tensors (PyTorch's MaxPool2d without dilation or ceil_mode): forward keeps the
// argmax of every window for backward. x (N, C, H, W), y and argmax (N, C, OH, OW), contiguous.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

struct Pool2dGeometry {
  int64_t N, C, H, W;
  int64_t KH, KW, stride_h, stride_w, pad_h, pad_w;

  EMBER_HOST_DEVICE int64_t OH() const { return (H + 2 * pad_h - KH) / stride_h + 1; }
  EMBER_HOST_DEVICE int64_t OW() const { return (W + 2 * pad_w - KW) / stride_w + 1; }
};

namespace detail {
// Positive sizes and strides, padding at most half the kernel (as PyTorch requires, so every window
// holds a real pixel), a window that fits the padded input, planes under 2^31 pixels (argmax is int32).
void check_pool2d_geometry(const char* name, const Pool2dGeometry& g);
}  // namespace detail

// argmax holds the index of the winning pixel inside its (H, W) plane, as PyTorch's `indices` do.
// A NaN in a window wins it (the output is NaN, as in PyTorch); among equal values the first wins.
namespace cpu {
template <typename T> void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, int32_t* argmax);
// dx (overwritten) = dy routed back to each window's argmax; overlapping windows add up.
template <typename T> void max_pool2d_backward(const Pool2dGeometry& g, const T* dy, const int32_t* argmax, T* dx);
}  // namespace cpu

namespace cuda {
template <typename T>
void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, int32_t* argmax, Stream stream);
// One thread per input pixel gathers from the windows that cover it: deterministic, no atomics.
template <typename T>
void max_pool2d_backward(const Pool2dGeometry& g, const T* dy, const int32_t* argmax, T* dx, Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
