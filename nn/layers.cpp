// Forward and backward of ember's layers, each as a few kernel launches through core/ops.
#include "nn/layers.h"

#include <algorithm>
#include <cmath>

#include "core/ops.h"
#include "nn/batchnorm.h"
#include "nn/summary.h"

namespace ember::nn {

// ---- Linear -------------------------------------------------------------------------------------

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype, Device device, Generator& generator)
    : in_(in_features), out_(out_features) {
  EMBER_CHECK(in_features > 0 && out_features > 0, ValueError, "Linear(", in_features, ", ", out_features,
              "): both sizes must be positive");
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  const uint64_t seed = generator.seed();
  auto uniform = [&](Shape shape) {
    uint64_t offset = generator.reserve(static_cast<uint64_t>(shape_numel(shape)));
    return Tensor::rand(shape, seed, dtype, device, -bound, bound, offset);
  };
  weight_ = register_parameter("weight", uniform({out_features, in_features}));
  if (bias) bias_ = register_parameter("bias", uniform({out_features}));
}

Tensor Linear::forward(const Tensor& x) {
  check_input(x, in_);
  input_ = x;
  return ops::linear(x, weight_->value, bias_ ? bias_->value : Tensor(), false);
}

Tensor Linear::forward_relu(const Tensor& x) {
  check_input(x, in_);
  input_ = x;
  return ops::linear(x, weight_->value, bias_ ? bias_->value : Tensor(), true);
}

Tensor Linear::backward(const Tensor& grad_out) { return backward_impl(grad_out, false); }

Tensor Linear::backward_through_relu(const Tensor& grad_out) { return backward_impl(grad_out, true); }

Tensor Linear::backward_impl(const Tensor& grad_out, bool through_relu) {
  check_forward_ran(input_.defined());
  check_input(grad_out, out_);
  // dW += dy^T x ; dx = dy W, unless the input is the model's data (dx would be thrown away) ; db += sum of dy
  Tensor grad_in =
      ops::linear_backward(grad_out, input_, weight_->value, weight_->grad, input_grad(), through_relu);
  if (bias_) ops::sum_rows_(bias_->grad, grad_out, 1);
  return grad_in;
}

// ---- ReLU, Flatten, Dropout -----------------------------------------------------------------------

Tensor ReLU::forward(const Tensor& x) {
  check_input(x);
  output_ = ops::relu(x);
  return output_;
}

Tensor ReLU::backward(const Tensor& grad_out) {
  check_forward_ran(output_.defined());
  return ops::relu_backward(grad_out, output_);
}

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

// ---- Sequential -------------------------------------------------------------------------------------

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(children().size()), std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  const auto& kids = children();
  relu_folded_.assign(kids.size(), false);
  for (size_t i = 0; i < kids.size(); ++i) {
    auto* linear = dynamic_cast<Linear*>(kids[i].second.get());
    auto* norm = dynamic_cast<BatchNorm2d*>(kids[i].second.get());
    auto* relu = i + 1 < kids.size() ? dynamic_cast<ReLU*>(kids[i + 1].second.get()) : nullptr;
    if (relu != nullptr && ((linear != nullptr && linear->bias() != nullptr) || norm != nullptr)) {
      // Linear -> ReLU: one GEMM with bias and ReLU in its epilogue; BatchNorm2d -> ReLU: one normalising
      // pass that clamps, and one backward pass that applies the mask.
      h = linear != nullptr ? linear->forward_relu(h) : norm->forward_relu(h);
      relu->adopt_output(h);
      relu_folded_[i + 1] = norm != nullptr;
      detail::record_layer(*kids[i].second, h);  // the pre-activation is never materialised: show the fused output
      detail::record_layer(*relu, h);
      ++i;
    } else {
      h = (*kids[i].second)(h);
    }
  }
  return h;
}

// Whether child i - 1 is a ReLU that ran on its own or fused into a Linear (not into a BatchNorm2d, whose backward
// applies the mask), so that child i got the ReLU's output as its input.
bool Sequential::relu_before(size_t i) const {
  return i >= 1 && i - 1 < relu_folded_.size() && !relu_folded_[i - 1] &&
         dynamic_cast<const ReLU*>(children()[i - 1].second.get()) != nullptr;
}

// The first child with parameters, or size() when none has any.
static size_t first_with_parameters(const Sequential& s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i].num_parameters() > 0) return i;
  return s.size();
}

void Sequential::set_input_grad(bool needed) {
  Module::set_input_grad(needed);
  const size_t first = first_with_parameters(*this);
  if (first < size()) (*this)[first].set_input_grad(needed);
}

Tensor Sequential::backward(const Tensor& grad_out) {
  Tensor g = grad_out;
  const auto& kids = children();
  if (kids.empty()) return input_grad() ? g : Tensor();
  const size_t stop = input_grad() ? 0 : std::min(first_with_parameters(*this), kids.size() - 1);
  for (size_t i = kids.size(); i-- > stop;) {
    auto* linear = dynamic_cast<Linear*>(kids[i].second.get());
    if (linear != nullptr && i > stop && relu_before(i)) {
      // ReLU -> Linear: the Linear's input is the ReLU's output, so its dX GEMM applies the ReLU's mask too.
      g = linear->backward_through_relu(g);
      if (backward_hook_) backward_hook_(i);
      --i;
    } else if (i >= relu_folded_.size() || !relu_folded_[i]) {
      g = kids[i].second->backward(g);
    }
    if (backward_hook_) backward_hook_(i);
  }
  return input_grad() ? g : Tensor();
}

}  // namespace ember::nn
