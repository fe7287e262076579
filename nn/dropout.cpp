// Dropout: a counter-based mask (the same on the CPU and on CUDA), multiplied in each way.
#include "nn/dropout.h"

#include "core/ops.h"

namespace ember::nn {

Dropout::Dropout(double p, Generator& generator) : p_(p), generator_(&generator) {
  EMBER_CHECK(p >= 0 && p < 1, ValueError, "Dropout(", p, "): p must be in [0, 1)");
}

Tensor Dropout::forward(const Tensor& x) {
  check_input(x);
  ran_ = true;
  if (!is_training() || p_ == 0) {
    mask_ = Tensor();
    return x;
  }
  uint64_t offset = generator_->reserve(static_cast<uint64_t>(x.numel()));
  mask_ = ops::dropout_mask(x.shape(), p_, generator_->seed(), offset, x.dtype(), x.device());
  return ops::mul(x, mask_);
}

Tensor Dropout::backward(const Tensor& grad_out) {
  check_forward_ran(ran_);
  return mask_.defined() ? ops::mul(grad_out, mask_) : grad_out;
}

}  // namespace ember::nn
