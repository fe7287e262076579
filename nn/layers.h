// ember's layers: Linear, ReLU, Flatten, Dropout, Identity, Sequential.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "core/generator.h"
#include "nn/module.h"

namespace ember::nn {

// y = x W^T + b with W (out, in) and b (out), initialised as PyTorch does: weights and bias uniform in
// (-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform with a = sqrt(5)), drawn from `generator`.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = DType::F32,
         Device device = Device::cpu(), Generator& generator = default_generator());
  Tensor forward(const Tensor& x) override;
  // forward with ReLU fused into the GEMM epilogue (Sequential uses it for Linear -> ReLU).
  Tensor forward_relu(const Tensor& x);
  Tensor backward(const Tensor& grad_out) override;
  // backward when this layer's input is the output of a ReLU: also goes back through that ReLU, whose mask
  // (input > 0) is applied inside the dX GEMM (Sequential uses it for ReLU -> Linear).
  Tensor backward_through_relu(const Tensor& grad_out);
  std::string type_name() const override { return "Linear"; }

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  const ParameterPtr& weight() const { return weight_; }
  const ParameterPtr& bias() const { return bias_; }  // null without bias

 private:
  Tensor backward_impl(const Tensor& grad_out, bool through_relu);

  int64_t in_, out_;
  ParameterPtr weight_, bias_;
  Tensor input_;  // (B, in), saved by forward for dW
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "ReLU"; }
  // Takes an output already computed by a fused Linear, keeping it for backward.
  void adopt_output(const Tensor& y) { output_ = y; }

 private:
  Tensor output_;
};

// (B, d1, d2, ...) -> (B, d1 * d2 * ...).
class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "Flatten"; }

 private:
  Shape input_shape_;
  bool ran_ = false;
};

// Inverted dropout: in training, zeroes each element with probability p and scales the rest by
// 1/(1-p); in eval, the identity. The mask comes from `generator` (reproducible with a seed).
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

class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  Tensor backward(const Tensor& grad_out) override { return grad_out; }
  std::string type_name() const override { return "Identity"; }
};

// Runs its children in order; they are named "0", "1", ... as in PyTorch's nn.Sequential.
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  // std::make_shared<Sequential>(linear, relu, linear2)
  template <typename... M>
  explicit Sequential(std::shared_ptr<M>... modules) : Sequential({std::shared_ptr<Module>(std::move(modules))...}) {}
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "Sequential"; }
  // Without an input gradient, backward stops at the first child with parameters (the children before it
  // have none to accumulate), which itself skips its input gradient.
  void set_input_grad(bool needed) override;
  size_t size() const { return children().size(); }
  Module& operator[](size_t i) const { return *children().at(i).second; }
  // Called by backward() right after child i's backward has added its parameter gradients, children in
  // reverse order (a data-parallel reducer starts summing those gradients while backward goes on).
  // A child that backward skips (before the first with parameters) is not reported. {} removes it.
  void set_backward_hook(std::function<void(size_t child)> hook) { backward_hook_ = std::move(hook); }

 private:
  std::function<void(size_t)> backward_hook_;
  // relu_folded_[i]: child i is a ReLU whose mask the previous child's backward applies (a fused
  // BatchNorm2d -> ReLU in the last forward), so backward skips it.
  std::vector<bool> relu_folded_;
  bool relu_before(size_t i) const;
};

}  // namespace ember::nn
