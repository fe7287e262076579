// Sequential: runs its children in order, and back through them in reverse. It never looks inside a child:
// fused pairs are modules of their own (LinearReLU, BatchNormReLU), built so or made by nn::fuse().
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "nn/module.h"

namespace ember::nn {

// Children are named "0", "1", ... as in PyTorch's nn.Sequential.
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
  // Puts `module` in child i's place under the same name (nn::fuse() does this).
  void replace(size_t i, std::shared_ptr<Module> module);
  // Called by backward() right after child i's backward has added its parameter gradients, children in
  // reverse order (a data-parallel reducer starts summing those gradients while backward goes on).
  // A child that backward skips (before the first with parameters) is not reported. {} removes it.
  void set_backward_hook(std::function<void(size_t child)> hook) { backward_hook_ = std::move(hook); }

 private:
  std::function<void(size_t)> backward_hook_;
};

}  // namespace ember::nn
