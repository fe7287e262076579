// Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d as one module, for a convolution of few taps such as the CNN's first
// (ops::conv_batch_norm_relu_pool: on an AVX-512 host the convolution's output is never stored, each plane computed
// again where BatchNorm reads it). nn::fuse() makes it from a Conv2d and the BatchNormReLUPool after it, and the
// state_dict keeps its names: the block takes the BatchNormReLUPool's place (its parameters and buffers, under their
// names), and a FoldedConv2d the Conv2d's (the convolution's parameters, under theirs).
#pragma once

#include <memory>

#include "nn/batchnorm.h"
#include "nn/conv.h"

namespace ember::nn {

class ConvBatchNormReLUPool : public BatchNorm2d {
 public:
  // Shares conv's Parameters and block's, and takes block's buffers.
  ConvBatchNormReLUPool(std::shared_ptr<Conv2d> conv, BatchNormReLUPool& block);
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "ConvBatchNormReLUPool"; }
  const Conv2d& conv() const { return *conv_; }
  const ops::Pool2dParams& pool() const { return pool_; }

 private:
  std::shared_ptr<Conv2d> conv_;  // its parameters and checks; the FoldedConv2d before this block holds them too
  ops::Pool2dParams pool_;
  Tensor input_;
  ops::ConvBlockResult saved_;
  bool saved_training_ = true;
};

// A Conv2d whose work the ConvBatchNormReLUPool after it does: it keeps the convolution's parameters in the
// state_dict under the Conv2d's names and passes its input (and, backward, its gradient) on unchanged. Whether the
// input's gradient is needed goes on to the block, which computes it.
class FoldedConv2d : public Module {
 public:
  FoldedConv2d(const Conv2d& conv, std::shared_ptr<Module> block);
  Tensor forward(const Tensor& x) override { return x; }
  Tensor backward(const Tensor& grad_out) override { return grad_out; }
  std::string type_name() const override { return "FoldedConv2d"; }
  void set_input_grad(bool needed) override;

 private:
  std::shared_ptr<Module> block_;
};

}  // namespace ember::nn
