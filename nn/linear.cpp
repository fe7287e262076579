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

namespace {

// x (..., n) as the (rows, n) matrix the GEMMs take: a view when x is contiguous.
Tensor as_matrix(const Tensor& x) { return x.dim() == 2 ? x : x.reshape({-1, x.size(-1)}); }

// `shape` with its last dim replaced by `last`.
Shape with_last(Shape shape, int64_t last) {
  shape.back() = last;
  return shape;
}

}  // namespace

Tensor Linear::forward(const Tensor& x) {
  check_input(x, in_);
  input_shape_ = x.shape();
  input_ = as_matrix(x);
  Tensor y = ops::linear(input_, weight_->value, bias_ ? bias_->value : Tensor(), relu_);
  if (relu_) output_ = y;
  return x.dim() == 2 ? y : y.view(with_last(input_shape_, out_));
}

Tensor Linear::backward(const Tensor& grad_out) {
  check_forward_ran(input_.defined());
  check_input(grad_out, out_);
  EMBER_CHECK(grad_out.shape() == with_last(input_shape_, out_), ShapeError, path(), " (", type_name(),
              ") backward expects grad_output of shape ", shape_str(with_last(input_shape_, out_)),
              " (the forward's output), but got ", shape_str(grad_out.shape()));
  // Through the fused ReLU first: the gradient of the pre-activation.
  const Tensor g2 = as_matrix(grad_out);
  const Tensor g = relu_ ? ops::relu_backward(g2, output_) : g2;
  // dW += g^T x ; dx = g W, unless the input is the model's data (dx would be thrown away) ; db += sum of g
  Tensor grad_in = ops::linear_backward(g, input_, weight_->value, weight_->grad, input_grad());
  if (bias_) ops::sum_rows_(bias_->grad, g, 1);
  return grad_in.defined() && input_shape_.size() != 2 ? grad_in.view(input_shape_) : grad_in;
}

}  // namespace ember::nn
