// Optimizers (SGD, AdamW) over nn::Parameters, stepping with one fused kernel per tensor (optim/schedule.h holds
// the learning-rate schedules). State tensors live on their parameter's device and follow it: if the model is
// moved after the optimizer was built, the next step moves the state too.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/guard.h"
#include "core/ops.h"
#include "nn/module.h"

namespace ember::optim {

// What an optimizer needs to resume exactly: named state tensors and scalars.
struct OptimizerState {
  std::vector<std::pair<std::string, Tensor>> tensors;  // "0.momentum_buffer", "1.exp_avg", ...
  std::map<std::string, double> scalars;                // "lr", "0.step", ...
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<nn::ParameterPtr> params);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  const std::vector<nn::ParameterPtr>& params() const { return params_; }
  // Every later step() is skipped where `guard` flagged the step (the guard must outlive the optimizer's
  // use of it; nullptr detaches it). Attach it before the first step: the steps it skips are not counted.
  virtual void set_guard(const NonFiniteGuard* guard) { guard_ = guard; }
  virtual OptimizerState state_dict() const = 0;
  // Throws FormatError naming what is missing or mismatched; on failure the optimizer is unchanged.
  virtual void load_state_dict(const OptimizerState& state) = 0;

 protected:
  std::vector<nn::ParameterPtr> params_;
  double lr_ = 0;
  const NonFiniteGuard* guard_ = nullptr;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<nn::ParameterPtr> params, ops::SgdOptions options);
  void step() override;
  // With a guard the momentum buffers start at zero instead of at the first gradient (a skipped first step
  // cannot leave them unset); that is the same update only without dampening, so a guard needs dampening 0.
  void set_guard(const NonFiniteGuard* guard) override;
  OptimizerState state_dict() const override;
  void load_state_dict(const OptimizerState& state) override;
  const ops::SgdOptions& options() const { return options_; }

 private:
  ops::SgdOptions options_;
  std::vector<Tensor> momentum_;  // per parameter; undefined until its first step
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<nn::ParameterPtr> params, ops::AdamWOptions options);
  void step() override;
  // Parameter i's own weight decay instead of options.weight_decay (PyTorch's param groups: BERT decays its
  // matrices only).
  void set_weight_decay(size_t i, double weight_decay);
  OptimizerState state_dict() const override;
  void load_state_dict(const OptimizerState& state) override;

 private:
  ops::AdamWOptions options_;
  std::vector<double> weight_decay_;  // per parameter
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::vector<int64_t> steps_;  // step() calls; the state saves them less the guard's skipped steps
};

}  // namespace ember::optim
