// 2-d convolution on NCHW tensors and its two gradients (kernels/conv.h).
#pragma once

#include "core/tensor.h"

namespace ember::ops {

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

// x (N, C, H, W) with weight (OC, C, KH, KW) and bias (OC) or an undefined Tensor: y (N, OC, OH, OW).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dParams& p);
// The gradient w.r.t. the input of shape input_shape, given grad_out (N, OC, OH, OW).
Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, const Shape& input_shape,
                             const Conv2dParams& p);
// grad_weight += dL/dweight and grad_bias += dL/dbias (grad_bias may be undefined), in place.
void conv2d_backward_weight_(Tensor& grad_weight, Tensor& grad_bias, const Tensor& x, const Tensor& grad_out,
                             const Conv2dParams& p);
// Both of the above: grad_weight and grad_bias accumulated as conv2d_backward_weight_, and the input's gradient
// returned as conv2d_backward_input. On the host one pass, each chunk of grad_out gathered once for both products
// (the same bits as the two ops); on CUDA the two ops.
Tensor conv2d_backward_(Tensor& grad_weight, Tensor& grad_bias, const Tensor& x, const Tensor& grad_out,
                        const Tensor& weight, const Conv2dParams& p);

}  // namespace ember::ops
