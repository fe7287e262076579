// Registry rows of the CNN families: conv (kernels/conv.h), pool (kernels/pool.h) and batchnorm
// (kernels/batchnorm.h, BatchNorm -> ReLU -> MaxPool2d included), on NCHW batches with odd square images.
#include <cmath>

#include "core/ops/registry_cases.h"

namespace ember::ops::registry {

namespace {

constexpr int64_t kImages = 2, kChannels = 3, kFilters = 5;  // conv and pool: x (2, 3, S, S), weight (5, 3, k, k)
constexpr int64_t kBnImages = 3, kBnChannels = 5;            // batch norm: x (3, 5, S, S)

// A 3x3 kernel with padding 1 (stride 2 for the backward rows) where the image allows, else 1x1.
struct ConvCase {
  Shape x;
  Conv2dParams p;
  int64_t kernel;
};
ConvCase conv_case(int64_t n, bool strided) {
  const int64_t side = odd_side(n, kImages * kChannels);
  const int64_t k = side >= 3 ? 3 : 1;
  const int64_t stride = strided && side >= 3 ? 2 : 1;
  return {{kImages, kChannels, side, side}, {stride, stride, k / 2, k / 2}, k};
}

OpCase labelled(const ConvCase& cc) {
  OpCase c = case_for(cc.x);
  c.label += " k" + std::to_string(cc.kernel) + " s" + std::to_string(cc.p.stride_h) + " p" +
             std::to_string(cc.p.pad_h);
  return c;
}

Shape conv_out(const ConvCase& cc) {
  const int64_t oh = (cc.x[2] + 2 * cc.p.pad_h - cc.kernel) / cc.p.stride_h + 1;
  return {kImages, kFilters, oh, oh};
}

// The sums are exact at the test sizes; past a few thousand terms a float weight gradient rounds.
double conv_tolerance(DType dtype) { return tolerance(dtype, 1e-5, 1e-12); }

OpCase make_conv2d(int64_t n, DType dtype) {
  const ConvCase cc = conv_case(n, false);
  OpCase c = labelled(cc);
  c.inputs = {grid_values(cc.x, 61, dtype), grid_values({kFilters, kChannels, cc.kernel, cc.kernel}, 62, dtype),
              grid_values({kFilters}, 63, dtype)};
  c.run = [p = cc.p](Device, Args& a) { return Outputs{ops::conv2d(a[0], a[1], a[2], p)}; };
  c.tolerance = conv_tolerance(dtype);
  return c;
}

OpCase make_conv2d_backward_input(int64_t n, DType dtype) {
  const ConvCase cc = conv_case(n, true);
  OpCase c = labelled(cc);
  c.inputs = {grid_values(conv_out(cc), 64, dtype),
              grid_values({kFilters, kChannels, cc.kernel, cc.kernel}, 65, dtype)};
  c.run = [cc](Device, Args& a) { return Outputs{ops::conv2d_backward_input(a[0], a[1], cc.x, cc.p)}; };
  c.tolerance = conv_tolerance(dtype);
  return c;
}

// grad_weight and grad_bias accumulate onto their starting values.
OpCase make_conv2d_backward_weight_(int64_t n, DType dtype) {
  const ConvCase cc = conv_case(n, true);
  OpCase c = labelled(cc);
  c.inputs = {grid_values(cc.x, 66, dtype), grid_values(conv_out(cc), 67, dtype),
              grid_values({kFilters, kChannels, cc.kernel, cc.kernel}, 68, dtype), grid_values({kFilters}, 69, dtype)};
  c.run = [p = cc.p](Device, Args& a) {
    ops::conv2d_backward_weight_(a[2], a[3], a[0], a[1], p);
    return Outputs{a[2], a[3]};
  };
  c.tolerance = conv_tolerance(dtype);
  return c;
}

// Both gradients at once: dx, and grad_weight and grad_bias accumulated onto their starting values.
OpCase make_conv2d_backward_(int64_t n, DType dtype) {
  const ConvCase cc = conv_case(n, true);
  OpCase c = labelled(cc);
  c.inputs = {grid_values(cc.x, 70, dtype), grid_values(conv_out(cc), 71, dtype),
              grid_values({kFilters, kChannels, cc.kernel, cc.kernel}, 72, dtype), grid_values({kFilters}, 73, dtype),
              grid_values({kFilters, kChannels, cc.kernel, cc.kernel}, 74, dtype)};
  c.run = [p = cc.p](Device, Args& a) {
    Tensor dx = ops::conv2d_backward_(a[2], a[3], a[0], a[1], a[4], p);
    return Outputs{dx, a[2], a[3]};
  };
  c.tolerance = conv_tolerance(dtype);
  return c;
}

// forward: 2x2 windows, stride 2 (the host's fast path; an odd side drops its last row and column). backward:
// overlapping 3x3 windows, stride 2, padding 1, where gradients of neighbouring windows add up.
Pool2dParams pool_params(int64_t side, bool overlapping) {
  if (side < 3) return {1, 1, 1, 1, 0, 0};
  return overlapping ? Pool2dParams{3, 3, 2, 2, 1, 1} : Pool2dParams{2, 2, 2, 2, 0, 0};
}

OpCase make_max_pool2d(int64_t n, DType dtype) {
  const int64_t side = odd_side(n, kImages * kChannels);
  OpCase c = case_for({kImages, kChannels, side, side});
  c.inputs = {grid_values({kImages, kChannels, side, side}, 71, dtype)};  // ties: the first largest wins
  c.run = [p = pool_params(side, false)](Device, Args& a) {
    MaxPool2dResult r = ops::max_pool2d(a[0], p);
    return Outputs{r.output, r.argmax};
  };
  return c;
}

OpCase make_max_pool2d_backward(int64_t n, DType dtype) {
  const int64_t side = odd_side(n, kImages * kChannels);
  const Shape x{kImages, kChannels, side, side};
  const Pool2dParams p = pool_params(side, true);
  OpCase c = case_for(x);
  MaxPool2dResult forward = ops::max_pool2d(grid_values(x, 72, dtype), p);
  c.inputs = {grid_values(forward.output.shape(), 73, dtype), forward.argmax};
  c.run = [x, p](Device, Args& a) { return Outputs{ops::max_pool2d_backward(a[0], a[1], x, p)}; };
  return c;
}

// x, weight, bias, running_mean, running_var, num_batches_tracked.
Args batch_norm_inputs(int64_t n, DType dtype) {
  const int64_t side = odd_side(n, kBnImages * kBnChannels);
  return {smooth_values({kBnImages, kBnChannels, side, side}, 81, dtype, -2, 2),
          smooth_values({kBnChannels}, 82, dtype, 0.5, 1.5), smooth_values({kBnChannels}, 83, dtype),
          smooth_values({kBnChannels}, 84, dtype, -0.5, 0.5),
          smooth_values({kBnChannels}, 85, dtype, 0.5, 2), Tensor::zeros({}, DType::I64)};
}

double batch_norm_tolerance(DType dtype) { return tolerance(dtype, 1e-5, 1e-12); }

template <bool kTraining, bool kRelu>
OpCase make_batch_norm(int64_t n, DType dtype) {
  Args inputs = batch_norm_inputs(n, dtype);
  OpCase c = case_for(inputs[0].shape());
  c.inputs = inputs;
  c.run = [](Device, Args& a) {
    BatchNormState state{a[3], a[4], a[5]};
    BatchNormResult r = ops::batch_norm(a[0], a[1], a[2], state, kTraining, 0.1, 1e-5, kRelu);
    if (kTraining) return Outputs{r.output, r.mean, r.invstd, a[3], a[4], a[5]};
    return Outputs{r.output, r.invstd};
  };
  c.tolerance = batch_norm_tolerance(dtype);
  return c;
}

// The forward's saved statistics (and ReLU output) come from the host: dy, x, weight, mean, invstd, relu_output,
// grad_weight, grad_bias.
template <bool kTraining>
OpCase make_batch_norm_backward(int64_t n, DType dtype) {
  Args in = batch_norm_inputs(n, dtype);
  BatchNormState state{in[3], in[4], in[5]};
  const BatchNormResult saved = ops::batch_norm(in[0], in[1], in[2], state, kTraining, 0.1, 1e-5, kTraining);
  OpCase c = case_for(in[0].shape());
  c.inputs = {smooth_values(in[0].shape(), 86, dtype), in[0], in[1], saved.mean.clone(), saved.invstd};
  if (kTraining) c.inputs.push_back(saved.output);  // the fused ReLU's output
  c.inputs.push_back(smooth_values({kBnChannels}, 87, dtype));
  c.inputs.push_back(smooth_values({kBnChannels}, 88, dtype));
  c.run = [](Device, Args& a) {
    const BatchNormResult s{Tensor(), a[3], a[4]};
    Tensor& grad_weight = a[kTraining ? 6 : 5];
    Tensor& grad_bias = a[kTraining ? 7 : 6];
    Tensor dx = ops::batch_norm_backward(a[0], a[1], a[2], s, kTraining ? a[5] : Tensor(), kTraining, grad_weight,
                                         grad_bias);
    return Outputs{dx, grad_weight, grad_bias};
  };
  c.tolerance = batch_norm_tolerance(dtype);
  return c;
}

// BatchNorm -> ReLU -> MaxPool2d: x on the grid, so that both devices pick the same winners (normalising keeps a
// channel's order, and ties stay ties); the forward's 2x2 windows, the backward's overlapping ones.
template <bool kTraining>
OpCase make_batch_norm_relu_pool(int64_t n, DType dtype) {
  Args inputs = batch_norm_inputs(n, dtype);
  inputs[0] = grid_values(inputs[0].shape(), 89, dtype, -2, 2);
  OpCase c = case_for(inputs[0].shape());
  c.inputs = inputs;
  c.run = [p = pool_params(inputs[0].size(2), false)](Device, Args& a) {
    BatchNormState state{a[3], a[4], a[5]};
    BatchNormPoolResult r = ops::batch_norm_relu_pool(a[0], a[1], a[2], state, kTraining, 0.1, 1e-5, p);
    if (kTraining) return Outputs{r.output, r.argmax, r.mean, r.invstd, a[3], a[4], a[5]};
    return Outputs{r.output, r.argmax, r.invstd};
  };
  c.tolerance = batch_norm_tolerance(dtype);
  return c;
}

// dy, x, weight, mean, invstd, the pooled output, argmax, grad_weight, grad_bias; the forward ran on the host.
template <bool kTraining>
OpCase make_batch_norm_relu_pool_backward(int64_t n, DType dtype) {
  Args in = batch_norm_inputs(n, dtype);
  const Pool2dParams p = pool_params(in[0].size(2), true);
  BatchNormState state{in[3], in[4], in[5]};
  const BatchNormPoolResult saved = ops::batch_norm_relu_pool(in[0], in[1], in[2], state, kTraining, 0.1, 1e-5, p);
  OpCase c = case_for(in[0].shape());
  c.inputs = {smooth_values(saved.output.shape(), 90, dtype),
              in[0],
              in[1],
              saved.mean.clone(),
              saved.invstd,
              saved.output,
              saved.argmax,
              smooth_values({kBnChannels}, 91, dtype),
              smooth_values({kBnChannels}, 92, dtype)};
  c.run = [p](Device, Args& a) {
    const BatchNormPoolResult s{a[5], a[6], a[3], a[4]};
    Tensor dx = ops::batch_norm_relu_pool_backward(a[0], a[1], a[2], s, p, kTraining, a[7], a[8]);
    return Outputs{dx, a[7], a[8]};
  };
  c.tolerance = batch_norm_tolerance(dtype);
  return c;
}

}  // namespace

std::vector<OpRow> conv_rows() {
  return {
      {"conv2d", "ops::conv2d", "conv", "cpu::conv2d_forward", "cuda::conv2d_forward", kFloating, make_conv2d},
      {"conv2d_backward_input", "ops::conv2d_backward_input", "conv", "cpu::conv2d_backward_input",
       "cuda::conv2d_backward_input", kFloating, make_conv2d_backward_input},
      {"conv2d_backward_weight_", "ops::conv2d_backward_weight_", "conv", "cpu::conv2d_backward_weight",
       "cuda::conv2d_backward_weight", kFloating, make_conv2d_backward_weight_},
      {"conv2d_backward_", "ops::conv2d_backward_", "conv", "cpu::conv2d_backward",
       "cuda::conv2d_backward_weight, cuda::conv2d_backward_input", kFloating, make_conv2d_backward_},
  };
}

std::vector<OpRow> pool_rows() {
  return {
      {"max_pool2d", "ops::max_pool2d", "pool", "cpu::max_pool2d_forward", "cuda::max_pool2d_forward", kFloating,
       make_max_pool2d},
      {"max_pool2d_backward", "ops::max_pool2d_backward", "pool", "cpu::max_pool2d_backward",
       "cuda::max_pool2d_backward", kFloating, make_max_pool2d_backward},
  };
}

std::vector<OpRow> batchnorm_rows() {
  const char* fam = "batchnorm";
  const char* cpu_train = "cpu::batch_norm_forward_train";
  const char* cuda_train = "cuda::batch_norm_forward_train";
  const char* cpu_eval = "cpu::batch_norm_forward_eval";
  const char* cuda_eval = "cuda::batch_norm_forward_eval";
  const char* pool_backward_kernels = "cuda::batch_norm_backward, cuda::relu_backward, cuda::max_pool2d_backward";
  return {
      {"batch_norm_train", "ops::batch_norm", fam, cpu_train, cuda_train, kFloating, make_batch_norm<true, false>},
      {"batch_norm_train_relu", "ops::batch_norm", fam, cpu_train, cuda_train, kFloating, make_batch_norm<true, true>},
      {"batch_norm_eval", "ops::batch_norm", fam, cpu_eval, cuda_eval, kFloating, make_batch_norm<false, false>},
      {"batch_norm_eval_relu", "ops::batch_norm", fam, cpu_eval, cuda_eval, kFloating, make_batch_norm<false, true>},
      {"batch_norm_backward", "ops::batch_norm_backward", fam, "cpu::batch_norm_backward",
       "cuda::batch_norm_backward", kFloating, make_batch_norm_backward<true>},
      {"batch_norm_backward_eval", "ops::batch_norm_backward", fam, "cpu::batch_norm_backward",
       "cuda::batch_norm_backward", kFloating, make_batch_norm_backward<false>},
      {"batch_norm_relu_pool_train", "ops::batch_norm_relu_pool", fam, "cpu::batch_norm_relu_pool_forward_train",
       "cuda::batch_norm_forward_train, cuda::max_pool2d_forward", kFloating, make_batch_norm_relu_pool<true>},
      {"batch_norm_relu_pool_eval", "ops::batch_norm_relu_pool", fam, "cpu::batch_norm_relu_pool_forward_eval",
       "cuda::batch_norm_forward_eval, cuda::max_pool2d_forward", kFloating, make_batch_norm_relu_pool<false>},
      {"batch_norm_relu_pool_backward", "ops::batch_norm_relu_pool_backward", fam,
       "cpu::batch_norm_relu_pool_backward", pool_backward_kernels, kFloating,
       make_batch_norm_relu_pool_backward<true>},
      {"batch_norm_relu_pool_backward_eval", "ops::batch_norm_relu_pool_backward", fam,
       "cpu::batch_norm_relu_pool_backward", pool_backward_kernels, kFloating,
       make_batch_norm_relu_pool_backward<false>},
  };
}

}  // namespace ember::ops::registry
