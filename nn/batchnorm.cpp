// BatchNorm2d: buffers registered under PyTorch's names, so they move, convert and save with the model.
#include "nn/batchnorm.h"

#include "nn/conv.h"

namespace ember::nn {

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum, DType dtype, Device device)
    : features_(num_features), eps_(eps), momentum_(momentum) {
  EMBER_CHECK(num_features > 0, ValueError, "BatchNorm2d(", num_features, "): num_features must be positive");
  EMBER_CHECK(eps > 0, ValueError, "BatchNorm2d: eps must be positive, got ", eps);
  EMBER_CHECK(momentum >= 0 && momentum <= 1, ValueError, "BatchNorm2d: momentum must be in [0, 1], got ", momentum);
  weight_ = register_parameter("weight", Tensor::ones({num_features}, dtype, device));
  bias_ = register_parameter("bias", Tensor::zeros({num_features}, dtype, device));
  register_buffer("running_mean", Tensor::zeros({num_features}, dtype, device));
  register_buffer("running_var", Tensor::ones({num_features}, dtype, device));
  register_buffer("num_batches_tracked", Tensor::zeros({}, DType::I64, device));
}

Tensor BatchNorm2d::forward(const Tensor& x) { return run(x, false); }

Tensor BatchNorm2d::forward_relu(const Tensor& x) { return run(x, true); }

Tensor BatchNorm2d::run(const Tensor& x, bool relu) {
  check_input(x);
  detail::check_nchw(*this, x, features_, 1, 1, "one value per channel and pixel");
  EMBER_CHECK(!is_training() || x.size(0) * x.size(2) * x.size(3) > 1, ValueError, path(),
              " (BatchNorm2d) expected more than 1 value per channel when training, got input of shape ",
              shape_str(x.shape()), "; use a batch of at least 2, or eval()");
  ops::BatchNormState state{buffer("running_mean"), buffer("running_var"), buffer("num_batches_tracked")};
  saved_ = ops::batch_norm(x, weight_->value, bias_->value, state, is_training(), momentum_, eps_, relu);
  saved_training_ = is_training();
  input_ = x;
  relu_output_ = relu ? saved_.output : Tensor();
  return saved_.output;
}

Tensor BatchNorm2d::backward(const Tensor& grad_out) {
  check_forward_ran(input_.defined());
  check_input(grad_out);
  return ops::batch_norm_backward(grad_out, input_, weight_->value, saved_, relu_output_, saved_training_,
                                  weight_->grad, bias_->grad);
}

}  // namespace ember::nn
