// ReLU: one elementwise kernel each way.
#include "nn/activation.h"

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

}  // namespace ember::nn
