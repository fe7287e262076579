// Conv2d on NCHW batches, with PyTorch's parameters, names and init. Wrong input is a ShapeError that names the
// layer's path and the (N, C, H, W) it expects.
#pragma once

#include "core/generator.h"
#include "core/ops/conv.h"
#include "nn/module.h"
#include "nn/size2.h"

namespace ember::nn {

// y = conv(x, weight) + bias, weight (out, in, KH, KW) and bias (out) uniform in +-1/sqrt(in * KH * KW)
// like PyTorch's default init, drawn from `generator`.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1, Size2 padding = 0,
         bool bias = true, DType dtype = DType::F32, Device device = Device::cpu(),
         Generator& generator = default_generator());
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "Conv2d"; }
  std::string describe() const;  // "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))"

  int64_t in_channels() const { return in_; }
  int64_t out_channels() const { return out_; }
  const ops::Conv2dParams& params() const { return params_; }
  const ParameterPtr& weight() const { return weight_; }
  const ParameterPtr& bias() const { return bias_; }  // null without bias

 private:
  int64_t in_, out_, kernel_h_, kernel_w_;
  ops::Conv2dParams params_;
  ParameterPtr weight_, bias_;
  Tensor input_;  // (N, in, H, W), kept by forward for the weight gradient
};

}  // namespace ember::nn
