// GELU, PyTorch's F.gelu with approximate "none" (the exact erf form) or "tanh" (kernels/gelu.h).
#pragma once

#include <string>

#include "core/tensor.h"

namespace ember::ops {

// Any floating x; approximate is "none" or "tanh" (ValueError otherwise).
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
// grad_out * gelu'(x), x the forward's input.
Tensor gelu_backward(const Tensor& grad_out, const Tensor& x, const std::string& approximate = "none");

}  // namespace ember::ops
