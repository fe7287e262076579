// Batch normalisation over the channels of NCHW (or (N, C)) tensors, with a fusable ReLU (kernels/batchnorm.h).
#pragma once

#include "core/ops/conv.h"
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

struct ConvBlockResult : BatchNormPoolResult {
  Tensor conv_output;  // the convolution's output where it was stored for backward; undefined where recomputed
};
// Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d as one op, for a convolution of few taps (the CNN's first block): where
// the host kernels recompute its planes (float32, stride 1, at most kConvBlockMaxTaps taps, an AVX-512 CPU, OpenBLAS summing as they do;
// kernels/batchnorm.h) the convolution's output is never stored, and backward computes it again; elsewhere
// conv2d, then batch_norm_relu_pool. The same results as conv2d then batch_norm_relu_pool, bit for bit.
constexpr int64_t kConvBlockMaxTaps = 27;  // the most taps (C * KH * KW) whose planes are recomputed
ConvBlockResult conv_batch_norm_relu_pool(const Tensor& x, const Tensor& conv_weight, const Tensor& conv_bias,
                                          const Conv2dParams& conv, const Tensor& weight, const Tensor& bias,
                                          BatchNormState& state, bool training, double momentum, double eps,
                                          const Pool2dParams& pool);
// The parameter gradients a block's backward adds into (any may be undefined but conv_weight).
struct ConvBlockGrads {
  Tensor &conv_weight, &conv_bias, &weight, &bias;
};
// From the pooled output's gradient: adds every parameter gradient; returns dL/dx, or an undefined Tensor when
// input_grad is false (x is data). Without saved.conv_output, the convolution's output is computed again (by
// planes on the host, as the forward; else by conv2d).
Tensor conv_batch_norm_relu_pool_backward(const Tensor& grad_out, const Tensor& x, const Tensor& conv_weight,
                                          const Tensor& conv_bias, const Conv2dParams& conv, const Tensor& weight,
                                          const ConvBlockResult& saved, const Pool2dParams& pool, bool training,
                                          const ConvBlockGrads& grads, bool input_grad);

}  // namespace ember::ops
