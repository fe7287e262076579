// Layer normalisation over the last dim, PyTorch's layer_norm with weight and bias (kernels/layernorm.h).
#pragma once

#include "core/tensor.h"

namespace ember::ops {

struct LayerNormResult {
  Tensor output;      // x's shape
  Tensor mean, rstd;  // x's shape without the last dim: what backward needs
};
// x (..., C) with C > 0; weight and bias (C) or undefined (scale 1, shift 0); eps >= 0.
LayerNormResult layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// Returns dL/dx; grad_weight += sum(dy * xhat), grad_bias += sum(dy) over the rows (either may be undefined).
Tensor layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const LayerNormResult& saved,
                           Tensor& grad_weight, Tensor& grad_bias);

}  // namespace ember::ops
