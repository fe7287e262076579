// Batch normalisation over the channels of NCHW (or (N, C)) tensors, with a fusable ReLU (kernels/batchnorm.h).
#pragma once

#include "core/ops/pool.h"
#include "core/tensor.h"

namespace ember::ops {

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

struct BatchNormPoolResult {
  Tensor output;        // (N, C, OH, OW): max_pool2d of the normalised and clamped input
  Tensor argmax;        // (N, C, OH, OW) int32: each window's winner inside its (H, W) plane
  Tensor mean, invstd;  // (C), as BatchNormResult's
};
// BatchNorm2d -> ReLU -> MaxPool2d, the CNN's block, as one op: on the host one kernel that never writes the
// normalised tensor out (kernels/batchnorm.h); on CUDA batch_norm, then max_pool2d. The same results as those two
// ops in a row.
BatchNormPoolResult batch_norm_relu_pool(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                         BatchNormState& state, bool training, double momentum, double eps,
                                         const Pool2dParams& pool);
// From the pooled output's gradient: grad_weight += ..., grad_bias += ... (either may be undefined); returns dL/dx.
// On CUDA: relu_backward on the pooled output (a window's winner holds it), max_pool2d_backward, batch_norm_backward.
Tensor batch_norm_relu_pool_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                                     const BatchNormPoolResult& saved, const Pool2dParams& pool, bool training,
                                     Tensor& grad_weight, Tensor& grad_bias);

}  // namespace ember::ops
