// LayerNorm: one layer_norm op each way; the backward recomputes the normalised input from the saved statistics.
#include "nn/layernorm.h"

namespace ember::nn {

LayerNorm::LayerNorm(int64_t normalized_shape, double eps, bool elementwise_affine, DType dtype, Device device)
    : features_(normalized_shape), eps_(eps) {
  EMBER_CHECK(normalized_shape > 0, ValueError, "LayerNorm(", normalized_shape,
              "): normalized_shape (the size of the last dim) must be positive");
  EMBER_CHECK(eps >= 0, ValueError, "LayerNorm: eps must be >= 0, got ", eps);
  if (!elementwise_affine) return;
  weight_ = register_parameter("weight", Tensor::ones({normalized_shape}, dtype, device));
  bias_ = register_parameter("bias", Tensor::zeros({normalized_shape}, dtype, device));
}

Tensor LayerNorm::forward(const Tensor& x) {
  check_input(x, features_);
  saved_ = ops::layer_norm(x, weight_ ? weight_->value : Tensor(), bias_ ? bias_->value : Tensor(), eps_);
  input_ = x;
  return saved_.output;
}

Tensor LayerNorm::backward(const Tensor& grad_out) {
  check_forward_ran(input_.defined());
  check_input(grad_out);
  Tensor no_grad;
  return ops::layer_norm_backward(grad_out, input_, weight_ ? weight_->value : Tensor(), saved_,
                                  weight_ ? weight_->grad : no_grad, bias_ ? bias_->grad : no_grad);
}

}  // namespace ember::nn
