// The kernels' convolution geometry of conv2d's arguments, checked (defined, one device and dtype, floating, a
// filter that fits, the bias's shape; ShapeError, ValueError naming `op`): shared by conv2d and the fused
// conv_batch_norm_relu_pool (core/ops/batchnorm.h).
#pragma once

#include "core/ops/conv.h"
#include "kernels/conv.h"

namespace ember::ops::internal {

kernels::Conv2dGeometry conv2d_geometry(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                        const Conv2dParams& p);

}  // namespace ember::ops::internal
