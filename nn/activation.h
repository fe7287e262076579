// Activation modules: ReLU and GELU (PyTorch's approximate "none" or "tanh").
#pragma once

#include "nn/module.h"

namespace ember::nn {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "ReLU"; }

 private:
  Tensor output_;  // its mask (output > 0) is backward's
};

class GELU : public Module {
 public:
  // approximate: "none" (the exact erf form, PyTorch's default) or "tanh"; ValueError otherwise.
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "GELU"; }
  const std::string& approximate() const { return approximate_; }

 private:
  std::string approximate_;
  Tensor input_;  // gelu'(input) is backward's
};

}  // namespace ember::nn
