// Activation modules: ReLU.
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

}  // namespace ember::nn
