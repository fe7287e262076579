// BatchNorm2d with PyTorch's parameters (weight, bias) and buffers (running_mean, running_var,
// num_batches_tracked): batch statistics in train(), running ones in eval().
#pragma once

#include "core/ops_cnn.h"
#include "nn/module.h"

namespace ember::nn {

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, DType dtype = DType::F32,
                       Device device = Device::cpu());
  Tensor forward(const Tensor& x) override;
  // forward with the ReLU that follows it fused in (Sequential uses it for BatchNorm2d -> ReLU); backward
  // then applies the ReLU's mask itself, so the ReLU's own backward is skipped.
  Tensor forward_relu(const Tensor& x);
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "BatchNorm2d"; }

  int64_t num_features() const { return features_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }
  const ParameterPtr& weight() const { return weight_; }
  const ParameterPtr& bias() const { return bias_; }
  const Tensor& running_mean() { return buffer("running_mean"); }
  const Tensor& running_var() { return buffer("running_var"); }
  const Tensor& num_batches_tracked() { return buffer("num_batches_tracked"); }

 private:
  Tensor run(const Tensor& x, bool relu);

  int64_t features_;
  double eps_, momentum_;
  ParameterPtr weight_, bias_;
  // What backward needs from the last forward.
  Tensor input_, relu_output_;
  ops::BatchNormResult saved_;
  bool saved_training_ = true;
};

}  // namespace ember::nn
