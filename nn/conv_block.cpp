// ConvBatchNormReLUPool and FoldedConv2d: the Conv2d's checks, then one op each way.
#include "nn/conv_block.h"

namespace ember::nn {

ConvBatchNormReLUPool::ConvBatchNormReLUPool(std::shared_ptr<Conv2d> conv, BatchNormReLUPool& block)
    : BatchNorm2d(block, true), conv_(std::move(conv)), pool_(block.pool()) {
  EMBER_CHECK(conv_->out_channels() == num_features(), ValueError, "ConvBatchNormReLUPool: the convolution's ",
              conv_->out_channels(), " output channels must be the BatchNorm's ", num_features(), " features");
}

Tensor ConvBatchNormReLUPool::forward(const Tensor& x) {
  conv_->check_batch(x);
  const ParameterPtr& b = conv_->bias();
  ops::BatchNormState state = norm_state();
  saved_ = ops::conv_batch_norm_relu_pool(x, conv_->weight()->value, b ? b->value : Tensor(), conv_->params(),
                                          weight()->value, bias()->value, state, is_training(), momentum(), eps(),
                                          pool_);
  saved_training_ = is_training();
  input_ = x;
  return saved_.output;
}

Tensor ConvBatchNormReLUPool::backward(const Tensor& grad_out) {
  check_forward_ran(input_.defined());
  check_input(grad_out);
  const ParameterPtr& b = conv_->bias();
  Tensor no_bias;
  const ops::ConvBlockGrads grads{conv_->weight()->grad, b ? b->grad : no_bias, weight()->grad, bias()->grad};
  return ops::conv_batch_norm_relu_pool_backward(grad_out, input_, conv_->weight()->value, b ? b->value : Tensor(),
                                                 conv_->params(), weight()->value, saved_, pool_, saved_training_,
                                                 grads, input_grad());
}

FoldedConv2d::FoldedConv2d(const Conv2d& conv, std::shared_ptr<Module> block) : block_(std::move(block)) {
  register_parameter("weight", conv.weight());
  if (conv.bias()) register_parameter("bias", conv.bias());
}

void FoldedConv2d::set_input_grad(bool needed) {
  Module::set_input_grad(needed);
  block_->set_input_grad(needed);
}

}  // namespace ember::nn
