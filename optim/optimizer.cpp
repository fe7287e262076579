// SGD, AdamW and the learning-rate schedules.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>

namespace ember::optim {

namespace {

// State follows its parameter: after model.to(device) the next step moves it once.
void follow(Tensor& state, const Tensor& param) {
  if (state.defined() && state.device() != param.device()) state = state.to(param.device());
}

const Tensor* find(const OptimizerState& s, const std::string& name) {
  for (const auto& [n, t] : s.tensors)
    if (n == name) return &t;
  return nullptr;
}

Tensor load_like(const OptimizerState& s, const std::string& name, const Tensor& param) {
  const Tensor* t = find(s, name);
  EMBER_CHECK(t != nullptr, FormatError, "optimizer state has no tensor '", name, "'");
  EMBER_CHECK(t->shape() == param.shape() && t->dtype() == param.dtype(), FormatError, "optimizer state '", name,
              "' has shape ", shape_str(t->shape()), " ", dtype_name(t->dtype()), " but its parameter is ",
              shape_str(param.shape()), " ", dtype_name(param.dtype()));
  return t->to(param.device()).clone();
}

double scalar(const OptimizerState& s, const std::string& name) {
  auto it = s.scalars.find(name);
  EMBER_CHECK(it != s.scalars.end(), FormatError, "optimizer state has no scalar '", name, "'");
  return it->second;
}

}  // namespace

Optimizer::Optimizer(std::vector<nn::ParameterPtr> params) : params_(std::move(params)) {
  for (const auto& p : params_) EMBER_CHECK(p != nullptr, ValueError, "optimizer given a null parameter");
}

void Optimizer::zero_grad() {
  for (auto& p : params_) ops::fill_(p->grad, 0);
}

// ---- SGD ------------------------------------------------------------------------------------------------

SGD::SGD(std::vector<nn::ParameterPtr> params, ops::SgdOptions options)
    : Optimizer(std::move(params)), options_(options), momentum_(params_.size()) {
  EMBER_CHECK(options.lr >= 0, ValueError, "SGD: lr must be >= 0, got ", options.lr);
  EMBER_CHECK(options.momentum >= 0, ValueError, "SGD: momentum must be >= 0, got ", options.momentum);
  EMBER_CHECK(options.weight_decay >= 0, ValueError, "SGD: weight_decay must be >= 0, got ", options.weight_decay);
  EMBER_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0), ValueError,
              "SGD: nesterov needs momentum > 0 and dampening 0");
  lr_ = options.lr;
}

void SGD::set_guard(const NonFiniteGuard* guard) {
  EMBER_CHECK(guard == nullptr || options_.dampening == 0, ValueError,
              "SGD: a non-finite guard needs dampening = 0 (got ", options_.dampening,
              "): with the guard the momentum buffer starts at zero, which equals PyTorch's first step only "
              "without dampening");
  guard_ = guard;
}

void SGD::step() {
  ops::SgdOptions o = options_;
  o.lr = lr_;
  for (size_t i = 0; i < params_.size(); ++i) {
    nn::Parameter& p = *params_[i];
    bool first = false;
    if (o.momentum != 0) {
      follow(momentum_[i], p.value);
      if (!momentum_[i].defined()) {
        // The device decides whether this step is applied, so with a guard the buffer must already hold
        // a valid state (zero) for whichever step turns out to be the first applied one.
        momentum_[i] = guard_ != nullptr ? Tensor::zeros(p.value.shape(), p.value.dtype(), p.value.device())
                                         : Tensor::empty(p.value.shape(), p.value.dtype(), p.value.device());
        first = guard_ == nullptr;
      }
    }
    ops::sgd_step_(p.value, p.grad, momentum_[i], o, first, guard_);
  }
}

OptimizerState SGD::state_dict() const {
  OptimizerState s;
  s.scalars["lr"] = lr_;
  for (size_t i = 0; i < params_.size(); ++i)
    if (momentum_[i].defined()) s.tensors.emplace_back(std::to_string(i) + ".momentum_buffer", momentum_[i]);
  return s;
}

void SGD::load_state_dict(const OptimizerState& s) {
  std::vector<Tensor> loaded(params_.size());
  for (size_t i = 0; i < params_.size(); ++i)
    if (find(s, std::to_string(i) + ".momentum_buffer") != nullptr)
      loaded[i] = load_like(s, std::to_string(i) + ".momentum_buffer", params_[i]->value);
  double lr = scalar(s, "lr");
  momentum_ = std::move(loaded);
  lr_ = lr;
}

// ---- AdamW ------------------------------------------------------------------------------------------------

AdamW::AdamW(std::vector<nn::ParameterPtr> params, ops::AdamWOptions options)
    : Optimizer(std::move(params)), options_(options), weight_decay_(params_.size(), options.weight_decay),
      exp_avg_(params_.size()), exp_avg_sq_(params_.size()), steps_(params_.size(), 0) {
  EMBER_CHECK(options.lr >= 0, ValueError, "AdamW: lr must be >= 0, got ", options.lr);
  EMBER_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1, ValueError,
              "AdamW: betas must be in [0, 1), got ", options.beta1, ", ", options.beta2);
  EMBER_CHECK(options.eps >= 0, ValueError, "AdamW: eps must be >= 0, got ", options.eps);
  lr_ = options.lr;
}

void AdamW::set_weight_decay(size_t i, double weight_decay) {
  EMBER_CHECK(i < params_.size() && weight_decay >= 0, ValueError, "AdamW: cannot give parameter ", i, " of ",
              params_.size(), " the weight decay ", weight_decay);
  weight_decay_[i] = weight_decay;
}

void AdamW::step() {
  ops::AdamWOptions o = options_;
  o.lr = lr_;
  for (size_t i = 0; i < params_.size(); ++i) {
    nn::Parameter& p = *params_[i];
    o.weight_decay = weight_decay_[i];
    follow(exp_avg_[i], p.value);
    follow(exp_avg_sq_[i], p.value);
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = Tensor::zeros(p.value.shape(), p.value.dtype(), p.value.device());
      exp_avg_sq_[i] = Tensor::zeros(p.value.shape(), p.value.dtype(), p.value.device());
    }
    ops::adamw_step_(p.value, p.grad, exp_avg_[i], exp_avg_sq_[i], o, ++steps_[i], guard_);
  }
}

OptimizerState AdamW::state_dict() const {
  OptimizerState s;
  s.scalars["lr"] = lr_;
  const int64_t skipped = guard_ != nullptr ? guard_->report().count : 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!exp_avg_[i].defined()) continue;
    s.tensors.emplace_back(std::to_string(i) + ".exp_avg", exp_avg_[i]);
    s.tensors.emplace_back(std::to_string(i) + ".exp_avg_sq", exp_avg_sq_[i]);
    s.scalars[std::to_string(i) + ".step"] = static_cast<double>(std::max<int64_t>(0, steps_[i] - skipped));
  }
  return s;
}

void AdamW::load_state_dict(const OptimizerState& s) {
  std::vector<Tensor> m(params_.size()), v(params_.size());
  std::vector<int64_t> steps(params_.size(), 0);
  for (size_t i = 0; i < params_.size(); ++i) {
    std::string prefix = std::to_string(i);
    if (find(s, prefix + ".exp_avg") == nullptr) continue;
    m[i] = load_like(s, prefix + ".exp_avg", params_[i]->value);
    v[i] = load_like(s, prefix + ".exp_avg_sq", params_[i]->value);
    steps[i] = static_cast<int64_t>(scalar(s, prefix + ".step"));
  }
  double lr = scalar(s, "lr");
  exp_avg_ = std::move(m), exp_avg_sq_ = std::move(v), steps_ = std::move(steps), lr_ = lr;
}

}  // namespace ember::optim
