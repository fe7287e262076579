// nn::Module: the base of every layer. Holds named parameters, buffers and child modules in
// registration order, moves them between devices in place, and defines the gradient contract.
//
// Gradient contract (tested in tests/nn/test_module.cpp):
//   forward(x)          keeps what backward needs and returns the output;
//   backward(grad_out)  returns the gradient w.r.t. the input of the last forward and ADDS the
//                       parameter gradients into each Parameter's grad (so two backward calls
//                       accumulate, as in PyTorch);
//   zero_grad()         sets every gradient to zero.
//   set_input_grad(false) lets backward skip the gradient w.r.t. the input (it returns an undefined Tensor)
//                       while still adding every parameter gradient: for a model's first layer, whose input
//                       is data (PyTorch: an input that does not require grad).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember::nn {

// A trainable tensor and its gradient. Shared by handle: an optimizer holding a Parameter sees it
// move when the module moves (Module::to replaces `value` and `grad` in place).
struct Parameter {
  Tensor value;
  Tensor grad;  // same shape, dtype and device as value; zeros until the first backward
};
using ParameterPtr = std::shared_ptr<Parameter>;

class Module {
 public:
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& x) = 0;
  virtual Tensor backward(const Tensor& grad_out) = 0;
  virtual std::string type_name() const = 0;

  // forward() plus a record of the output shape when a summary is being traced.
  Tensor operator()(const Tensor& x);

  std::vector<std::pair<std::string, ParameterPtr>> named_parameters() const;  // "0.weight", ...
  std::vector<ParameterPtr> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // Parameter values and buffers under PyTorch's state_dict names and order: a module's own parameters,
  // then its own buffers, then each child's ("0.weight", "1.running_mean", "1.num_batches_tracked", ...).
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  // Copies the given values into the parameters and buffers of the same names (converted to each one's
  // dtype and device, in place, so optimizers keep their references). Strict: the names must be exactly
  // those of state_dict() (ValueError listing the missing and unexpected ones); a shape that differs is
  // a ShapeError naming the entry. Not strict: missing and unexpected names are skipped.
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& tensors, bool strict = true);
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  int64_t num_parameters() const;

  void zero_grad();
  // Whether backward() returns the gradient w.r.t. the input (the default) or skips it; see the contract above.
  virtual void set_input_grad(bool needed) { input_grad_ = needed; }
  bool input_grad() const { return input_grad_; }
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves parameters, gradients and buffers (recursively) to `device`, in place. Copies nothing
  // for tensors already there.
  Module& to(Device device);
  // Converts floating parameters, gradients and buffers to `dtype` (float64 for gradient checks).
  Module& to(DType dtype);
  // The device of the parameters (cpu for a module without any).
  Device device() const;
  DType dtype() const;

  // The module's place in the tree for messages: "model", "model.0", ...
  const std::string& path() const { return path_; }

 protected:
  Module() = default;

  ParameterPtr register_parameter(const std::string& name, Tensor value);
  // Registers a Parameter another module holds too (a fused module taking over its originals' parameters).
  ParameterPtr register_parameter(const std::string& name, ParameterPtr shared);
  void register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  Tensor& buffer(const std::string& name);
  // Puts `module` in the place of child i, under child i's name.
  void replace_child(size_t i, std::shared_ptr<Module> module);

  // Throws DeviceMismatchError if x is not on this module's device (naming the module path and
  // type, both devices and the fix), and ShapeError if x's last dim is not `features` (-1: any).
  void check_input(const Tensor& x, int64_t features = -1) const;
  // ShapeError "<path> (<type>) expects input of shape (N, <channels>, H, W) with H >= min_h and W >= min_w
  // (<why>), but got <shape>" unless x is 4-d with `channels` channels (-1: any) and fits.
  void check_nchw(const Tensor& x, int64_t channels, int64_t min_h, int64_t min_w, const std::string& why) const;
  // Throws ValueError when backward() runs without a preceding forward().
  void check_forward_ran(bool ran) const;

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect_parameters(std::vector<ParameterPtr>& out) const;
  // The first of parameters() without building the list, or null.
  const Parameter* first_parameter() const;
  // (name, tensor) for every parameter value and buffer of this module and below, in state_dict order.
  void collect_state(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out);
  void set_path(const std::string& path);
  static void check_name(const std::string& name, const char* what);
  void check_unique(const std::string& name) const;

  std::vector<std::pair<std::string, ParameterPtr>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::string path_ = "model";
  bool training_ = true;
  bool input_grad_ = true;
};

}  // namespace ember::nn
