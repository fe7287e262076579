// Linear (y = x W^T + b), its fused form LinearReLU (relu(x W^T + b) in one GEMM epilogue), and Identity.
#pragma once

#include <memory>

#include "core/generator.h"
#include "nn/module.h"

namespace ember::nn {

// y = x W^T + b over the last dim of x (..., in), as PyTorch's nn.Linear: the leading dims are rows of one GEMM.
// W (out, in) and b (out), initialised as PyTorch does: uniform in (-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform
// with a = sqrt(5)), drawn from `generator`.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = DType::F32,
         Device device = Device::cpu(), Generator& generator = default_generator());
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "Linear"; }

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  const ParameterPtr& weight() const { return weight_; }
  const ParameterPtr& bias() const { return bias_; }  // null without bias

 protected:
  // LinearReLU's: the same parameters (drawn alike, or those of `linear`), with the ReLU fused in.
  Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype, Device device, Generator& generator,
         bool relu);
  explicit Linear(const Linear& linear, bool relu);

 private:
  int64_t in_, out_;
  bool relu_ = false;
  ParameterPtr weight_, bias_;
  Shape input_shape_;  // (..., in): the last forward's input shape
  Tensor input_;       // (rows, in): that input as a matrix, saved by forward for dW
  Tensor output_;      // (rows, out), saved with a fused ReLU for its mask
};

// nn.Sequential(Linear, ReLU) as one module: the ReLU runs in the GEMM's epilogue, and backward applies its mask
// (output > 0) in the pass that sums the bias gradient. Its parameters are a Linear's, named "weight" and "bias",
// so a Sequential holding it at index i beside an Identity at i + 1 has PyTorch's state_dict names (nn/fuse.h).
class LinearReLU : public Linear {
 public:
  LinearReLU(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = DType::F32,
             Device device = Device::cpu(), Generator& generator = default_generator())
      : Linear(in_features, out_features, bias, dtype, device, generator, true) {}
  // Fuses `linear` with the ReLU after it, sharing its Parameters (an optimizer holding them keeps working).
  explicit LinearReLU(const Linear& linear) : Linear(linear, true) {}
  std::string type_name() const override { return "LinearReLU"; }
};

class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  Tensor backward(const Tensor& grad_out) override { return grad_out; }
  std::string type_name() const override { return "Identity"; }
};

}  // namespace ember::nn
