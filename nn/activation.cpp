// ReLU and GELU: one elementwise kernel each way.
#include "nn/activation.h"

#include <utility>

#include "core/ops.h"

namespace ember::nn {

Tensor ReLU::forward(const Tensor& x) {
  check_input(x);
  output_ = ops::relu(x);
  return output_;
}

Tensor ReLU::backward(const Tensor& grad_out) {
  check_forward_ran(output_.defined());
  return ops::relu_backward(grad_out, output_);
}

GELU::GELU(std::string approximate) : approximate_(std::move(approximate)) {
  EMBER_CHECK(approximate_ == "none" || approximate_ == "tanh", ValueError,
              "GELU: approximate must be \"none\" (the exact erf form) or \"tanh\", got \"", approximate_, "\"");
}

Tensor GELU::forward(const Tensor& x) {
  check_input(x);
  input_ = x;
  return ops::gelu(x, approximate_);
}

Tensor GELU::backward(const Tensor& grad_out) {
  check_forward_ran(input_.defined());
  return ops::gelu_backward(grad_out, input_, approximate_);
}

}  // namespace ember::nn
