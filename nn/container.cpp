// Sequential: each child's forward in order, each child's backward in reverse.
#include "nn/container.h"

#include <algorithm>

namespace ember::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(children().size()), std::move(module));
}

void Sequential::replace(size_t i, std::shared_ptr<Module> module) { replace_child(i, std::move(module)); }

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& [name, child] : children()) h = (*child)(h);
  return h;
}

// The first child with parameters, or size() when none has any.
static size_t first_with_parameters(const Sequential& s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i].num_parameters() > 0) return i;
  return s.size();
}

void Sequential::set_input_grad(bool needed) {
  Module::set_input_grad(needed);
  const size_t first = first_with_parameters(*this);
  if (first < size()) (*this)[first].set_input_grad(needed);
}

Tensor Sequential::backward(const Tensor& grad_out) {
  Tensor g = grad_out;
  const auto& kids = children();
  if (kids.empty()) return input_grad() ? g : Tensor();
  const size_t stop = input_grad() ? 0 : std::min(first_with_parameters(*this), kids.size() - 1);
  for (size_t i = kids.size(); i-- > stop;) {
    g = kids[i].second->backward(g);
    if (backward_hook_) backward_hook_(i);
  }
  return input_grad() ? g : Tensor();
}

}  // namespace ember::nn
