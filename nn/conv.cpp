// Conv2d and MaxPool2d: input checks that name the layer, then the core ops forward and backward.
#include "nn/conv.h"

#include <cmath>

namespace ember::nn {

void detail::check_nchw(const Module& m, const Tensor& x, int64_t channels, int64_t min_h, int64_t min_w,
                        const std::string& why) {
  const bool fits = x.dim() == 4 && (channels < 0 || x.size(1) == channels) && x.size(2) >= min_h && x.size(3) >= min_w;
  if (fits) return;
  throw ShapeError(ember::detail::concat(m.path(), " (", m.type_name(), ") expects input of shape (N, ",
                                         channels < 0 ? std::string("C") : std::to_string(channels), ", H, W) with H >= ",
                                         min_h, " and W >= ", min_w, " (", why, "), but got ", shape_str(x.shape())));
}

// ---- Conv2d -------------------------------------------------------------------------------------------

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride, Size2 padding, bool bias,
               DType dtype, Device device, Generator& generator)
    : in_(in_channels), out_(out_channels), kernel_h_(kernel_size.h), kernel_w_(kernel_size.w),
      params_{stride.h, stride.w, padding.h, padding.w} {
  EMBER_CHECK(in_channels > 0 && out_channels > 0 && kernel_h_ > 0 && kernel_w_ > 0, ValueError, "Conv2d(", in_channels,
              ", ", out_channels, ", kernel_size=(", kernel_h_, ", ", kernel_w_, ")): channels and kernel must be positive");
  EMBER_CHECK(stride.h > 0 && stride.w > 0 && padding.h >= 0 && padding.w >= 0, ValueError, "Conv2d: stride must be positive and padding non-negative, got stride (",
              stride.h, ", ", stride.w, ") padding (", padding.h, ", ", padding.w, ")");
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels * kernel_h_ * kernel_w_));
  const uint64_t seed = generator.seed();
  auto uniform = [&](Shape shape) {
    uint64_t offset = generator.reserve(static_cast<uint64_t>(shape_numel(shape)));
    return Tensor::rand(shape, seed, dtype, device, -bound, bound, offset);
  };
  weight_ = register_parameter("weight", uniform({out_channels, in_channels, kernel_h_, kernel_w_}));
  if (bias) bias_ = register_parameter("bias", uniform({out_channels}));
}

std::string Conv2d::describe() const {
  return ember::detail::concat("Conv2d(", in_, ", ", out_, ", kernel_size=(", kernel_h_, ", ", kernel_w_, "), stride=(",
                               params_.stride_h, ", ", params_.stride_w, "), padding=(", params_.pad_h, ", ",
                               params_.pad_w, "))");
}

Tensor Conv2d::forward(const Tensor& x) {
  check_input(x);
  detail::check_nchw(*this, x, in_, std::max<int64_t>(1, kernel_h_ - 2 * params_.pad_h),
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
  ops::conv2d_backward_weight_(weight_->grad, bias_ ? bias_->grad : no_bias, input_, grad_out, params_);
  if (!input_grad()) return Tensor();  // the input is data: nobody needs its gradient
  return ops::conv2d_backward_input(grad_out, weight_->value, input_.shape(), params_);
}

// ---- MaxPool2d ----------------------------------------------------------------------------------------

MaxPool2d::MaxPool2d(Size2 kernel_size, std::optional<Size2> stride, Size2 padding) {
  const Size2 s = stride.value_or(kernel_size);
  params_ = {kernel_size.h, kernel_size.w, s.h, s.w, padding.h, padding.w};
  EMBER_CHECK(kernel_size.h > 0 && kernel_size.w > 0 && s.h > 0 && s.w > 0, ValueError,
              "MaxPool2d: kernel_size and stride must be positive, got kernel (", kernel_size.h, ", ", kernel_size.w,
              ") stride (", s.h, ", ", s.w, ")");
  EMBER_CHECK(padding.h >= 0 && padding.w >= 0 && 2 * padding.h <= kernel_size.h && 2 * padding.w <= kernel_size.w,
              ValueError, "MaxPool2d: padding should be at most half of the kernel size, got padding (", padding.h, ", ",
              padding.w, ") for kernel (", kernel_size.h, ", ", kernel_size.w, ")");
}

Tensor MaxPool2d::forward(const Tensor& x) {
  check_input(x);
  detail::check_nchw(*this, x, -1, std::max<int64_t>(1, params_.kernel_h - 2 * params_.pad_h),
                     std::max<int64_t>(1, params_.kernel_w - 2 * params_.pad_w),
                     "a " + std::to_string(params_.kernel_h) + "x" + std::to_string(params_.kernel_w) + " window");
  ops::MaxPool2dResult r = ops::max_pool2d(x, params_);
  argmax_ = r.argmax;
  input_shape_ = x.shape();
  return r.output;
}

Tensor MaxPool2d::backward(const Tensor& grad_out) {
  check_forward_ran(argmax_.defined());
  check_input(grad_out);
  return ops::max_pool2d_backward(grad_out, argmax_, input_shape_, params_);
}

}  // namespace ember::nn
