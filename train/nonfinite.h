// The non-finite guard (core/guard.h) as a training run uses it: every step, the loss and every gradient are
// checked where they live; the optimizer kernels skip a flagged step's update on the device; and the host stops the
// run naming the step and the tensors, or with --skip-nonfinite goes on and reports the steps it skipped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/guard.h"
#include "nn/module.h"

namespace ember::train {

class NonFiniteWatch {
 public:
  // Watches the loss and the gradients of `model`'s parameters (at most 63 tensors; ValueError beyond).
  NonFiniteWatch(const nn::Module& model, Device device, bool skip);
  NonFiniteGuard& guard() { return guard_; }

  // Queues the check of `step` (1-based) over the loss and every gradient, before the optimizer's step.
  void check(int64_t step, const Tensor& loss);
  // Stop mode: NumericalError naming the first flagged step, the tensors and the fix, once a check has found one
  // (never waits for the device: the optimizer kernels already skip every update from that step on).
  void stop_if_flagged(int64_t steps_per_epoch, double lr) const;
  // Skip mode: the steps skipped so far and the last of them (waits for the device).
  GuardReport report() const { return guard_.report(); }

 private:
  // "the loss and the gradients of 0.weight, 0.bias" for the entries a guard mask flags.
  std::string describe(uint64_t mask) const;
  // The parameters holding NaN/Inf (an update with finite gradients can still overflow them), or "".
  std::string nonfinite_parameters() const;

  bool skip_;
  NonFiniteGuard guard_;
  std::vector<std::string> names_;  // "the loss", then each parameter's name
  std::vector<nn::ParameterPtr> params_;
  std::vector<Tensor> tensors_;     // the loss and the gradients of the step being checked
};

}  // namespace ember::train
