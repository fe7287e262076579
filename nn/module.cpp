// Module: registration, traversal, zero_grad, train/eval, in-place device and dtype moves, input checks.
#include "nn/module.h"

#include <cctype>
#include <map>

#include "core/ops.h"
#include "nn/summary.h"

namespace ember::nn {

Tensor Module::operator()(const Tensor& x) {
  Tensor y = forward(x);
  detail::record_layer(*this, y);
  return y;
}

void Module::check_name(const std::string& name, const char* what) {
  bool ok = !name.empty();
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  EMBER_CHECK(ok, ValueError, "invalid ", what, " name '", name,
              "': use letters, digits and '_' only (a '.' would break the dotted parameter names)");
}

void Module::check_unique(const std::string& name) const {
  bool taken = false;
  for (const auto& [n, p] : parameters_) taken = taken || n == name;
  for (const auto& [n, b] : buffers_) taken = taken || n == name;
  for (const auto& [n, c] : children_) taken = taken || n == name;
  EMBER_CHECK(!taken, ValueError, path_, " (", type_name(), "): the name '", name, "' is already registered");
}

ParameterPtr Module::register_parameter(const std::string& name, Tensor value) {
  check_name(name, "parameter");
  check_unique(name);
  EMBER_CHECK(value.defined() && is_floating(value.dtype()), DTypeError, "parameter '", name,
              "' must be a defined floating tensor");
  auto p = std::make_shared<Parameter>();
  p->grad = Tensor::zeros(value.shape(), value.dtype(), value.device());
  p->value = std::move(value);
  parameters_.emplace_back(name, p);
  return p;
}

ParameterPtr Module::register_parameter(const std::string& name, ParameterPtr shared) {
  check_name(name, "parameter");
  check_unique(name);
  EMBER_CHECK(shared != nullptr && shared->value.defined(), ValueError, "parameter '", name, "' must be defined");
  parameters_.emplace_back(name, shared);
  return shared;
}

void Module::register_buffer(const std::string& name, Tensor value) {
  check_name(name, "buffer");
  check_unique(name);
  buffers_.emplace_back(name, std::move(value));
}

Tensor& Module::buffer(const std::string& name) {
  for (auto& [n, b] : buffers_)
    if (n == name) return b;
  throw ValueError(ember::detail::concat(path_, " (", type_name(), ") has no buffer named '", name, "'"));
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_name(name, "module");
  check_unique(name);
  EMBER_CHECK(module != nullptr, ValueError, "register_module('", name, "'): the module is null");
  module->set_path(path_ + "." + name);
  children_.emplace_back(name, std::move(module));
}

void Module::replace_child(size_t i, std::shared_ptr<Module> module) {
  EMBER_CHECK(i < children_.size(), ValueError, path_, " (", type_name(), ") has ", children_.size(),
              " children; there is no child ", i, " to replace");
  EMBER_CHECK(module != nullptr, ValueError, "replace_child(", i, "): the module is null");
  module->set_path(path_ + "." + children_[i].first);
  children_[i].second = std::move(module);
}

void Module::set_path(const std::string& path) {
  path_ = path;
  for (auto& [name, child] : children_) child->set_path(path + "." + name);
}

std::vector<std::pair<std::string, ParameterPtr>> Module::named_parameters() const {
  std::vector<std::pair<std::string, ParameterPtr>> out = parameters_;
  for (const auto& [name, child] : children_)
    for (auto& [sub, p] : child->named_parameters()) out.emplace_back(name + "." + sub, p);
  return out;
}

std::vector<ParameterPtr> Module::parameters() const {
  std::vector<ParameterPtr> out;
  collect_parameters(out);
  return out;
}

// Without the names: a layer's forward and backward check their input against the parameters every step.
void Module::collect_parameters(std::vector<ParameterPtr>& out) const {
  for (const auto& [name, p] : parameters_) out.push_back(p);
  for (const auto& [name, child] : children_) child->collect_parameters(out);
}

const Parameter* Module::first_parameter() const {
  if (!parameters_.empty()) return parameters_.front().second.get();
  for (const auto& [name, child] : children_)
    if (const Parameter* p = child->first_parameter()) return p;
  return nullptr;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out = buffers_;
  for (const auto& [name, child] : children_)
    for (auto& [sub, b] : child->named_buffers()) out.emplace_back(name + "." + sub, b);
  return out;
}

void Module::collect_state(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out) {
  for (auto& [name, p] : parameters_) out.emplace_back(prefix + name, &p->value);
  for (auto& [name, b] : buffers_) out.emplace_back(prefix + name, &b);
  for (auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, p] : parameters_) out.emplace_back(name, p->value);
  for (const auto& [name, b] : buffers_) out.emplace_back(name, b);
  for (const auto& [name, child] : children_)
    for (auto& [sub, t] : child->state_dict()) out.emplace_back(name + "." + sub, t);
  return out;
}

void Module::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& tensors, bool strict) {
  std::vector<std::pair<std::string, Tensor*>> entries;
  collect_state("", entries);
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : tensors) given[name] = &t;
  std::string missing, unexpected;
  for (const auto& [name, target] : entries) {
    auto it = given.find(name);
    if (it == given.end()) {
      missing += (missing.empty() ? "" : ", ") + name;
      continue;
    }
    const Tensor& src = *it->second;
    EMBER_CHECK(src.shape() == target->shape(), ShapeError, "load_state_dict: '", name, "' has shape ",
                shape_str(src.shape()), " but ", path_, " expects ", shape_str(target->shape()));
    given.erase(it);
  }
  for (const auto& [name, t] : given) unexpected += (unexpected.empty() ? "" : ", ") + name;
  EMBER_CHECK(!strict || (missing.empty() && unexpected.empty()), ValueError, "load_state_dict for ", path_, " (",
              type_name(), "): ", missing.empty() ? "" : "missing keys: " + missing,
              !missing.empty() && !unexpected.empty() ? "; " : "", unexpected.empty() ? "" : "unexpected keys: " + unexpected);
  // Only after every check passed, so a rejected call leaves the module as it was.
  for (const auto& [name, target] : entries)
    for (const auto& [src_name, src] : tensors)
      if (src_name == name) target->copy_from(src.dtype() == target->dtype() ? src : src.to(target->dtype()));
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p->value.numel();
  return n;
}

void Module::zero_grad() {
  for (auto& p : parameters()) ops::fill_(p->grad, 0);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

Module& Module::to(Device device) {
  for (auto& [name, p] : parameters_) {
    p->value = p->value.to(device);
    p->grad = p->grad.to(device);
  }
  for (auto& [name, b] : buffers_) b = b.to(device);
  for (auto& [name, child] : children_) child->to(device);
  return *this;
}

Module& Module::to(DType dtype) {
  for (auto& [name, p] : parameters_) {
    p->value = p->value.to(dtype);
    p->grad = p->grad.to(dtype);
  }
  for (auto& [name, b] : buffers_)
    if (is_floating(b.dtype())) b = b.to(dtype);
  for (auto& [name, child] : children_) child->to(dtype);
  return *this;
}

Device Module::device() const {
  const Parameter* first = first_parameter();
  return first == nullptr ? Device::cpu() : first->value.device();
}

DType Module::dtype() const {
  const Parameter* first = first_parameter();
  return first == nullptr ? DType::F32 : first->value.dtype();
}

void Module::check_input(const Tensor& x, int64_t features) const {
  EMBER_CHECK(x.defined(), ValueError, path_, " (", type_name(), ") got an undefined input tensor");
  const Parameter* first = first_parameter();
  const Device mine = first == nullptr ? Device::cpu() : first->value.device();
  if (first != nullptr && x.device() != mine) {
    throw DeviceMismatchError(ember::detail::concat(
        "Expected all tensors to be on the same device, but ", path_, " (", type_name(), ") got input on ",
        x.device().str(), " and its parameters on ", mine.str(), ". Move the input with .to(", mine.str(),
        ") inside the training loop, or the model with .to(", x.device().str(), ")."));
  }
  if (features >= 0) {
    EMBER_CHECK(x.dim() >= 1 && x.size(-1) == features, ShapeError, path_, " (", type_name(), ") expects input with ",
                features, " features in the last dim, but got shape ", shape_str(x.shape()));
  }
  if (first != nullptr) {
    const DType dtype = first->value.dtype();
    EMBER_CHECK(x.dtype() == dtype, DTypeError, path_, " (", type_name(), ") has ", dtype_name(dtype),
                " parameters but got a ", dtype_name(x.dtype()), " input; convert it with .to(", dtype_name(dtype), ")");
  }
}

void Module::check_nchw(const Tensor& x, int64_t channels, int64_t min_h, int64_t min_w, const std::string& why) const {
  const bool fits = x.dim() == 4 && (channels < 0 || x.size(1) == channels) && x.size(2) >= min_h && x.size(3) >= min_w;
  if (fits) return;
  throw ShapeError(ember::detail::concat(path_, " (", type_name(), ") expects input of shape (N, ",
                                         channels < 0 ? std::string("C") : std::to_string(channels), ", H, W) with H >= ",
                                         min_h, " and W >= ", min_w, " (", why, "), but got ", shape_str(x.shape())));
}

void Module::check_forward_ran(bool ran) const {
  EMBER_CHECK(ran, ValueError, path_, " (", type_name(),
              "): backward() called before forward(); run forward on a batch first");
}

}  // namespace ember::nn
