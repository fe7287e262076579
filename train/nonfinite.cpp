// NonFiniteWatch: the guard's tensors for one model, and the messages a flagged step gets.
#include "train/nonfinite.h"

#include <cmath>

namespace ember::train {

NonFiniteWatch::NonFiniteWatch(const nn::Module& model, Device device, bool skip)
    : skip_(skip), guard_(device, skip ? NonFiniteGuard::Mode::Skip : NonFiniteGuard::Mode::Stop), names_{"the loss"} {
  for (const auto& [name, p] : model.named_parameters()) {
    names_.push_back(name);
    params_.push_back(p);
  }
  EMBER_CHECK(names_.size() <= static_cast<size_t>(kGuardMaxTensors), ValueError, "the model has ", params_.size(),
              " parameter tensors; the non-finite guard watches at most ", kGuardMaxTensors - 1);
}

void NonFiniteWatch::check(int64_t step, const Tensor& loss) {
  tensors_.clear();
  tensors_.push_back(loss);
  for (const auto& p : params_) tensors_.push_back(p->grad);
  guard_.check(step, tensors_);
}

std::string NonFiniteWatch::describe(uint64_t mask) const {
  std::string grads;
  for (size_t i = 1; i < names_.size(); ++i)
    if (mask & guard_bit(static_cast<int>(i))) grads += (grads.empty() ? "" : ", ") + names_[i];
  const bool loss = (mask & guard_bit(0)) != 0;
  if (grads.empty()) return loss ? "the loss" : "nothing";
  return (loss ? "the loss and " : "") + std::string("the gradients of ") + grads;
}

std::string NonFiniteWatch::nonfinite_parameters() const {
  std::string bad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor v = params_[i]->value.to(Device::cpu());
    int64_t count = 0;
    for (float x : v.to_vector<float>()) count += !std::isfinite(x);
    if (count > 0) bad += detail::concat(bad.empty() ? "" : ", ", names_[i + 1], " (", count, " of ", v.numel(), ")");
  }
  return bad;
}

// The optimizer kernels have skipped the flagged step's update and every one since, so the parameters are those
// after the step before it.
void NonFiniteWatch::stop_if_flagged(int64_t steps_per_epoch, double lr) const {
  if (skip_ || guard_.first_bad_step() == 0) return;
  const GuardReport r = guard_.report();
  const int64_t s = r.first_step;
  const std::string params = nonfinite_parameters();
  throw NumericalError(detail::concat(
      "step ", s, " (epoch ", (s - 1) / steps_per_epoch + 1, ", batch ", (s - 1) % steps_per_epoch + 1,
      "): NaN or Inf in ", describe(r.first_mask), "; its update was not applied",
      params.empty() ? "" : " (non-finite parameters already: " + params + ")",
      ". Lower --lr (now ", lr, ") or pass --skip-nonfinite to skip such steps"));
}

}  // namespace ember::train
