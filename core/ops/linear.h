// Matrix products and the Linear layer's GEMMs (kernels/linear.h): 2-d, floating.
#pragma once

#include "core/tensor.h"

namespace ember::ops {

// Which CUDA GEMM runs: ember's hand-written kernel (default) or cuBLAS. The CPU always uses OpenBLAS.
enum class GemmBackend { Ember, Cublas };
void set_gemm_backend(GemmBackend backend);
GemmBackend gemm_backend();
// op(a) @ op(b), op = transpose when the flag is set.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// out = alpha * op(a) @ op(b) + beta * out, in place; beta = 1 accumulates (gradients).
void matmul_(Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, double alpha = 1,
             double beta = 0);
// y = x W^T + b, with ReLU fused into the GEMM epilogue when `relu`. x (B, in), weight (out, in),
// bias (out) or an undefined Tensor for none.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, bool relu = false);
// A Linear layer's GEMMs of backward: grad_weight += grad_out^T x in place (grad_weight (out, in), contiguous) and,
// when input_grad, returns grad_out @ weight (B, in), else an undefined Tensor. Bit for bit what matmul_ then
// matmul give; on the CPU both run in one pool region, so the threads wait once for the slower instead of twice.
Tensor linear_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, Tensor& grad_weight,
                       bool input_grad);

}  // namespace ember::ops
