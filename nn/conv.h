// Convolution and pooling layers on NCHW batches: Conv2d (PyTorch's parameters, names and init) and
// MaxPool2d. Wrong input is a ShapeError that names the layer's path and the (N, C, H, W) it expects.
#pragma once

#include <optional>

#include "core/generator.h"
#include "core/ops_cnn.h"
#include "nn/module.h"

namespace ember::nn {

// A kernel size, stride or padding: one number for both dims (3) or {height, width}.
struct Size2 {
  int64_t h, w;
  Size2(int64_t both) : h(both), w(both) {}  // NOLINT: implicit, as PyTorch takes an int or a pair
  Size2(int64_t height, int64_t width) : h(height), w(width) {}
};

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

// Max over kernel-sized windows every `stride` pixels (stride defaults to the kernel size, as in PyTorch);
// padding counts as -inf. Keeps the argmax of each window for backward.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0);
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "MaxPool2d"; }
  const ops::Pool2dParams& params() const { return params_; }

 private:
  ops::Pool2dParams params_;
  Tensor argmax_;  // (N, C, OH, OW) int32
  Shape input_shape_;
};

namespace detail {
// ShapeError "<path> (<type>) expects input of shape (N, <channels>, H, W) with H >= min_h and W >= min_w
// (<why>), but got <shape>" unless x is 4-d with `channels` channels (-1: any) and fits.
void check_nchw(const Module& m, const Tensor& x, int64_t channels, int64_t min_h, int64_t min_w, const std::string& why);
}  // namespace detail

}  // namespace ember::nn
