// 2-d max pooling on NCHW tensors and its gradient (kernels/pool.h).
#pragma once

#include "core/tensor.h"

namespace ember::ops {

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

}  // namespace ember::ops
