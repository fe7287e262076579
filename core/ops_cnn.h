// ember's CNN ops on NCHW tensors: conv2d, max_pool2d, batch_norm, each with its backward. Checks, output
// allocation and one dispatch to kernels::cpu or kernels::cuda, like every op in core/ops.h.
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

struct Pool2dParams {
  int64_t kernel_h = 2, kernel_w = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0;
};
struct MaxPool2dResult {
  Tensor output;  // (N, C, OH, OW)
  Tensor argmax;  // (N, C, OH, OW) int32: index of the winner inside its (H, W) plane
};
MaxPool2dResult max_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& argmax, const Shape& input_shape,
                           const Pool2dParams& p);

struct BatchNormState {
  Tensor running_mean, running_var;  // (C) floating, updated in place in training (both or neither defined)
  Tensor num_batches_tracked;        // 0-d int64, incremented in training (may be undefined)
};
struct BatchNormResult {
  Tensor output;
  Tensor mean, invstd;  // (C): what backward needs (the running mean in eval mode)
};
// x (N, C, H, W) [or (N, C)], weight and bias (C) or undefined. training: batch statistics, running ones
// moved by momentum; eval: the running statistics. relu fuses a ReLU into the output.
BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, BatchNormState& state,
                           bool training, double momentum, double eps, bool relu);
// grad_weight += ..., grad_bias += ... (either may be undefined); returns dL/dx. relu_output: the fused
// forward's output, or undefined. training: the forward used batch statistics.
Tensor batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const BatchNormResult& saved,
                           const Tensor& relu_output, bool training, Tensor& grad_weight, Tensor& grad_bias);

}  // namespace ember::ops
