// 2-d convolution on NCHW tensors (dilation 1, groups 1): forward, and the gradients of the input, the
// weight and the bias. x (N, C, H, W), weight (OC, C, KH, KW), bias (OC), y (N, OC, OH, OW), contiguous.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

struct Conv2dGeometry {
  int64_t N, C, H, W;  // input
  int64_t OC, KH, KW;  // weight (OC, C, KH, KW)
  int64_t stride_h, stride_w, pad_h, pad_w;

  EMBER_HOST_DEVICE int64_t OH() const { return (H + 2 * pad_h - KH) / stride_h + 1; }
  EMBER_HOST_DEVICE int64_t OW() const { return (W + 2 * pad_w - KW) / stride_w + 1; }
  // The GEMM's reduction length per output element: one weight filter.
  EMBER_HOST_DEVICE int64_t CKK() const { return C * KH * KW; }
};

namespace detail {
// The rules both twins share (positive sizes and strides, padding that leaves a window of real pixels,
// an output of at least one pixel): ValueError naming `name` and the geometry. In kernels/cpu/conv.cpp.
void check_conv2d_geometry(const char* name, const Conv2dGeometry& g);
}  // namespace detail

namespace cpu {
// y = conv(x, weight) + bias (bias may be null). im2col over a few images at a time + OpenBLAS.
template <typename T> void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* weight, const T* bias, T* y);
// dx = the gradient w.r.t. x of sum(dy * y); dx is overwritten.
template <typename T> void conv2d_backward_input(const Conv2dGeometry& g, const T* dy, const T* weight, T* dx);
// dweight += the gradient w.r.t. weight, dbias += the sum of dy over N, OH, OW (dbias may be null).
template <typename T>
void conv2d_backward_weight(const Conv2dGeometry& g, const T* x, const T* dy, T* dweight, T* dbias);
// Both: conv2d_backward_weight and, where dx is not null, conv2d_backward_input's dx from each chunk of dy gathered
// once (the same bits as the two calls).
template <typename T>
void conv2d_backward(const Conv2dGeometry& g, const T* x, const T* dy, const T* weight, T* dweight, T* dbias, T* dx);
}  // namespace cpu

namespace cuda {
// Implicit GEMM: tiles of the im2col matrix are gathered straight from x into shared memory; no
// im2col buffer, no atomics.
template <typename T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* weight, const T* bias, T* y, Stream stream);
template <typename T>
void conv2d_backward_input(const Conv2dGeometry& g, const T* dy, const T* weight, T* dx, Stream stream);
// Scratch (elements of T) conv2d_backward_weight needs: the split-K partial sums, reduced in a fixed order.
size_t conv2d_backward_weight_workspace_elems(const Conv2dGeometry& g);
template <typename T>
void conv2d_backward_weight(const Conv2dGeometry& g, const T* x, const T* dy, T* dweight, T* dbias, T* workspace,
                            Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
