// BatchNorm2d, BatchNormReLU and BatchNormReLUPool: buffers registered under PyTorch's names, so they move, convert
// and save with the model; one op each way.
#include "nn/batchnorm.h"

namespace ember::nn {

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum, DType dtype, Device device)
    : BatchNorm2d(num_features, eps, momentum, dtype, device, false) {}

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum, DType dtype, Device device, bool relu)
    : features_(num_features), eps_(eps), momentum_(momentum), relu_(relu) {
  EMBER_CHECK(num_features > 0, ValueError, type_name(), "(", num_features, "): num_features must be positive");
  EMBER_CHECK(eps > 0, ValueError, type_name(), ": eps must be positive, got ", eps);
  EMBER_CHECK(momentum >= 0 && momentum <= 1, ValueError, type_name(), ": momentum must be in [0, 1], got ", momentum);
  weight_ = register_parameter("weight", Tensor::ones({num_features}, dtype, device));
  bias_ = register_parameter("bias", Tensor::zeros({num_features}, dtype, device));
  register_buffer("running_mean", Tensor::zeros({num_features}, dtype, device));
  register_buffer("running_var", Tensor::ones({num_features}, dtype, device));
  register_buffer("num_batches_tracked", Tensor::zeros({}, DType::I64, device));
}

BatchNorm2d::BatchNorm2d(const BatchNorm2d& norm, bool relu)
    : features_(norm.features_), eps_(norm.eps_), momentum_(norm.momentum_), relu_(relu) {
  weight_ = register_parameter("weight", norm.weight_);
  bias_ = register_parameter("bias", norm.bias_);
  for (const auto& [name, b] : norm.named_buffers()) register_buffer(name, b);
}

void BatchNorm2d::check_batch(const Tensor& x) {
  check_input(x);
  check_nchw(x, features_, 1, 1, "one value per channel and pixel");
  EMBER_CHECK(!is_training() || x.size(0) * x.size(2) * x.size(3) > 1, ValueError, path(), " (", type_name(),
              ") expected more than 1 value per channel when training, got input of shape ", shape_str(x.shape()),
              "; use a batch of at least 2, or eval()");
}

ops::BatchNormState BatchNorm2d::norm_state() {
  return {buffer("running_mean"), buffer("running_var"), buffer("num_batches_tracked")};
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  check_batch(x);
  ops::BatchNormState state = norm_state();
  saved_ = ops::batch_norm(x, weight_->value, bias_->value, state, is_training(), momentum_, eps_, relu_);
  saved_training_ = is_training();
  input_ = x;
  return saved_.output;
}

Tensor BatchNorm2d::backward(const Tensor& grad_out) {
  check_forward_ran(input_.defined());
  check_input(grad_out);
  // With the fused ReLU, its mask (output > 0) is applied inside the same pass.
  return ops::batch_norm_backward(grad_out, input_, weight_->value, saved_, relu_ ? saved_.output : Tensor(),
                                  saved_training_, weight_->grad, bias_->grad);
}

BatchNormReLUPool::BatchNormReLUPool(int64_t num_features, const ops::Pool2dParams& pool, double eps, double momentum,
                                     DType dtype, Device device)
    : BatchNorm2d(num_features, eps, momentum, dtype, device, true), pool_(pool) {}

BatchNormReLUPool::BatchNormReLUPool(BatchNorm2d& norm, const ops::Pool2dParams& pool)
    : BatchNorm2d(norm, true), pool_(pool) {}

Tensor BatchNormReLUPool::forward(const Tensor& x) {
  check_batch(x);
  ops::BatchNormState state = norm_state();
  saved_ = ops::batch_norm_relu_pool(x, weight()->value, bias()->value, state, is_training(), momentum(), eps(), pool_);
  saved_training_ = is_training();
  input_ = x;
  return saved_.output;
}

Tensor BatchNormReLUPool::backward(const Tensor& grad_out) {
  check_forward_ran(input_.defined());
  check_input(grad_out);
  return ops::batch_norm_relu_pool_backward(grad_out, input_, weight()->value, saved_, pool_, saved_training_,
                                            weight()->grad, bias()->grad);
}

}  // namespace ember::nn
