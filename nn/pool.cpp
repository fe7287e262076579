// MaxPool2d: input checks that name the layer, then the core ops forward and backward.
#include "nn/pool.h"

#include <algorithm>

namespace ember::nn {

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
  check_nchw(x, -1, std::max<int64_t>(1, params_.kernel_h - 2 * params_.pad_h),
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
