// Inverted dropout.
#pragma once

#include "core/generator.h"
#include "nn/module.h"

namespace ember::nn {

// In training, zeroes each element with probability p and scales the rest by 1/(1-p); in eval, the identity.
// The mask comes from `generator` (reproducible with a seed), which must outlive the module.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator& generator = default_generator());
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "Dropout"; }

 private:
  double p_;
  Generator* generator_;
  Tensor mask_;  // undefined in eval mode or when p == 0
  bool ran_ = false;
};

}  // namespace ember::nn
