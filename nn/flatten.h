// Flatten: (B, d1, d2, ...) -> (B, d1 * d2 * ...), a view each way.
#pragma once

#include "nn/module.h"

namespace ember::nn {

class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "Flatten"; }

 private:
  Shape input_shape_;
  bool ran_ = false;
};

}  // namespace ember::nn
