// Flatten: reshapes, copying nothing.
#include "nn/flatten.h"

namespace ember::nn {

Tensor Flatten::forward(const Tensor& x) {
  check_input(x);
  EMBER_CHECK(x.dim() >= 1, ShapeError, path(), " (Flatten) expects a batch dim, got a 0-d tensor");
  input_shape_ = x.shape();
  ran_ = true;
  return x.dim() == 1 ? x.reshape({x.size(0), 1}) : x.flatten(1);
}

Tensor Flatten::backward(const Tensor& grad_out) {
  check_forward_ran(ran_);
  return grad_out.reshape(input_shape_);
}

}  // namespace ember::nn
