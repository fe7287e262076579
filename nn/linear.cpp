// Linear and LinearReLU: forward is one GEMM with its bias (and ReLU) in the epilogue; backward the layer's GEMMs.
#include "nn/linear.h"

#include <cmath>

#include "core/ops.h"
#include "nn/init.h"

namespace ember::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype, Device device, Generator& generator)
    : Linear(in_features, out_features, bias, dtype, device, generator, false) {}

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype, Device device, Generator& generator,
               bool relu)
    : in_(in_features), out_(out_features), relu_(relu) {
  EMBER_CHECK(in_features > 0 && out_features > 0, ValueError, type_name(), "(", in_features, ", ", out_features,
              "): both sizes must be positive");
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight_ = register_parameter("weight", uniform_init({out_features, in_features}, bound, dtype, device, generator));
  if (bias) bias_ = register_parameter("bias", uniform_init({out_features}, bound, dtype, device, generator));
}

Linear::Linear(const Linear& linear, bool relu) : in_(linear.in_), out_(linear.out_), relu_(relu) {
  weight_ = register_parameter("weight", linear.weight_);
  if (linear.bias_) bias_ = register_parameter("bias", linear.bias_);
}

Tensor Linear::forward(const Tensor& x) {
  check_input(x, in_);
  input_ = x;
  Tensor y = ops::linear(x, weight_->value, bias_ ? bias_->value : Tensor(), relu_);
  if (relu_) output_ = y;
  return y;
}

Tensor Linear::backward(const Tensor& grad_out) {
  check_forward_ran(input_.defined());
  check_input(grad_out, out_);
  // Through the fused ReLU first: the gradient of the pre-activation.
  const Tensor g = relu_ ? ops::relu_backward(grad_out, output_) : grad_out;
  // dW += g^T x ; dx = g W, unless the input is the model's data (dx would be thrown away) ; db += sum of g
  Tensor grad_in = ops::linear_backward(g, input_, weight_->value, weight_->grad, input_grad());
  if (bias_) ops::sum_rows_(bias_->grad, g, 1);
  return grad_in;
}

}  // namespace ember::nn
