// BatchNorm2d with PyTorch's parameters (weight, bias) and buffers (running_mean, running_var,
// num_batches_tracked): batch statistics in train(), running ones in eval(); and its fused forms BatchNormReLU and
// BatchNormReLUPool.
#pragma once

#include "core/ops/batchnorm.h"
#include "nn/module.h"

namespace ember::nn {

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, DType dtype = DType::F32,
                       Device device = Device::cpu());
  Tensor forward(const Tensor& x) override;
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

 protected:
  // The fused forms': a new layer, or `norm`'s parameters (shared) and buffers, with the ReLU fused in.
  BatchNorm2d(int64_t num_features, double eps, double momentum, DType dtype, Device device, bool relu);
  BatchNorm2d(const BatchNorm2d& norm, bool relu);
  // forward's checks of x: (N, num_features, H, W), more than one value per channel when training.
  void check_batch(const Tensor& x);
  ops::BatchNormState norm_state();

 private:
  int64_t features_;
  double eps_, momentum_;
  bool relu_ = false;
  ParameterPtr weight_, bias_;
  // What backward needs from the last forward.
  Tensor input_;
  ops::BatchNormResult saved_;
  bool saved_training_ = true;
};

// nn.Sequential(BatchNorm2d, ReLU) as one module: one normalising pass that clamps, and a backward that applies
// the ReLU's mask itself. Its parameters and buffers are a BatchNorm2d's, under the same names (nn/fuse.h).
class BatchNormReLU : public BatchNorm2d {
 public:
  explicit BatchNormReLU(int64_t num_features, double eps = 1e-5, double momentum = 0.1, DType dtype = DType::F32,
                         Device device = Device::cpu())
      : BatchNorm2d(num_features, eps, momentum, dtype, device, true) {}
  // Fuses `norm` with the ReLU after it, sharing its Parameters and taking its buffers.
  explicit BatchNormReLU(BatchNorm2d& norm) : BatchNorm2d(norm, true) {}
  std::string type_name() const override { return "BatchNormReLU"; }
};

// nn.Sequential(BatchNorm2d, ReLU, MaxPool2d) as one module, the CNN's block: one op each way
// (ops::batch_norm_relu_pool), whose host kernel never writes the normalised batch out. Its parameters and buffers
// are a BatchNorm2d's, under the same names; nn::fuse() makes it from a BatchNormReLU and the MaxPool2d after it.
class BatchNormReLUPool : public BatchNorm2d {
 public:
  BatchNormReLUPool(int64_t num_features, const ops::Pool2dParams& pool, double eps = 1e-5, double momentum = 0.1,
                    DType dtype = DType::F32, Device device = Device::cpu());
  // Fuses `norm` (its ReLU after it is implied) with the pooling after it, sharing its Parameters and buffers.
  BatchNormReLUPool(BatchNorm2d& norm, const ops::Pool2dParams& pool);
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "BatchNormReLUPool"; }
  const ops::Pool2dParams& pool() const { return pool_; }

 private:
  ops::Pool2dParams pool_;
  Tensor input_;
  ops::BatchNormPoolResult saved_;
  bool saved_training_ = true;
};

}  // namespace ember::nn
