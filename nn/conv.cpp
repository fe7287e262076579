// Conv2d: input checks that name the layer, then the core ops forward and backward.
#include "nn/conv.h"

#include <algorithm>
#include <cmath>

#include "core/ops/conv.h"
#include "nn/init.h"

namespace ember::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride, Size2 padding, bool bias,
               DType dtype, Device device, Generator& generator)
    : in_(in_channels), out_(out_channels), kernel_h_(kernel_size.h), kernel_w_(kernel_size.w),
      params_{stride.h, stride.w, padding.h, padding.w} {
  EMBER_CHECK(in_channels > 0 && out_channels > 0 && kernel_h_ > 0 && kernel_w_ > 0, ValueError, "Conv2d(", in_channels,
              ", ", out_channels, ", kernel_size=(", kernel_h_, ", ", kernel_w_, ")): channels and kernel must be positive");
  EMBER_CHECK(stride.h > 0 && stride.w > 0 && padding.h >= 0 && padding.w >= 0, ValueError, "Conv2d: stride must be positive and padding non-negative, got stride (",
              stride.h, ", ", stride.w, ") padding (", padding.h, ", ", padding.w, ")");
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels * kernel_h_ * kernel_w_));
  weight_ = register_parameter(
      "weight", uniform_init({out_channels, in_channels, kernel_h_, kernel_w_}, bound, dtype, device, generator));
  if (bias) bias_ = register_parameter("bias", uniform_init({out_channels}, bound, dtype, device, generator));
}

std::string Conv2d::describe() const {
  return ember::detail::concat("Conv2d(", in_, ", ", out_, ", kernel_size=(", kernel_h_, ", ", kernel_w_, "), stride=(",
                               params_.stride_h, ", ", params_.stride_w, "), padding=(", params_.pad_h, ", ",
                               params_.pad_w, "))");
}

Tensor Conv2d::forward(const Tensor& x) {
  check_input(x);
  check_nchw(x, in_, std::max<int64_t>(1, kernel_h_ - 2 * params_.pad_h),
                     std::max<int64_t>(1, kernel_w_ - 2 * params_.pad_w), "a " + std::to_string(kernel_h_) + "x" +
                         std::to_string(kernel_w_) + " kernel with padding (" + std::to_string(params_.pad_h) + ", " +
                         std::to_string(params_.pad_w) + ")");
  input_ = x;
  return ops::conv2d(x, weight_->value, bias_ ? bias_->value : Tensor(), params_);
}

Tensor Conv2d::backward(const Tensor& grad_out) {
  check_forward_ran(input_.defined());
  check_input(grad_out);
  Tensor no_bias;
  Tensor& grad_bias = bias_ ? bias_->grad : no_bias;
  if (input_grad()) return ops::conv2d_backward_(weight_->grad, grad_bias, input_, grad_out, weight_->value, params_);
  ops::conv2d_backward_weight_(weight_->grad, grad_bias, input_, grad_out, params_);
  return Tensor();  // the input is data: nobody needs its gradient
}

}  // namespace ember::nn
