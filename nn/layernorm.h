// LayerNorm over the last dim, PyTorch's nn.LayerNorm(normalized_shape, eps, elementwise_affine) with one
// normalised dim: parameters `weight` (ones) and `bias` (zeros) when affine, none otherwise.
#pragma once

#include "core/ops/layernorm.h"
#include "nn/module.h"

namespace ember::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     DType dtype = DType::F32, Device device = Device::cpu());
  // x (..., normalized_shape).
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "LayerNorm"; }

  int64_t normalized_shape() const { return features_; }
  double eps() const { return eps_; }
  bool elementwise_affine() const { return weight_ != nullptr; }
  const ParameterPtr& weight() const { return weight_; }  // null without elementwise_affine
  const ParameterPtr& bias() const { return bias_; }

 private:
  int64_t features_;
  double eps_;
  ParameterPtr weight_, bias_;
  // What backward needs from the last forward: the input and each row's mean and rstd.
  Tensor input_;
  ops::LayerNormResult saved_;
};

}  // namespace ember::nn
