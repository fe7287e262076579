// MaxPool2d on NCHW batches.
#pragma once

#include <optional>

#include "core/ops/pool.h"
#include "nn/module.h"
#include "nn/size2.h"

namespace ember::nn {

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

}  // namespace ember::nn
