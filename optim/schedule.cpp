// StepLr, CosineLr and LinearLr: closed forms of the step.
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace ember::optim {

namespace {
// The linear warmup both CosineLr and LinearLr start with: step 0 already takes a step's share of the rate.
double warmup_lr(double lr, int64_t step, int64_t warmup) {
  return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
}
}  // namespace

StepLr::StepLr(double lr, int64_t step_size, double gamma) : lr_(lr), step_size_(step_size), gamma_(gamma) {
  EMBER_CHECK(step_size > 0, ValueError, "StepLr: step_size must be positive, got ", step_size);
}

double StepLr::lr_at(int64_t step) const { return lr_ * std::pow(gamma_, static_cast<double>(step / step_size_)); }

CosineLr::CosineLr(double lr, int64_t total_steps, int64_t warmup_steps, double min_lr)
    : lr_(lr), min_lr_(min_lr), total_(total_steps), warmup_(warmup_steps) {
  EMBER_CHECK(total_steps > 0 && warmup_steps >= 0 && warmup_steps < total_steps, ValueError,
              "CosineLr: need 0 <= warmup_steps < total_steps, got warmup ", warmup_steps, " of ", total_steps);
}

double CosineLr::lr_at(int64_t step) const {
  if (step < warmup_) return warmup_lr(lr_, step, warmup_);
  double progress = static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
  progress = std::min(progress, 1.0);
  return min_lr_ + 0.5 * (lr_ - min_lr_) * (1 + std::cos(3.141592653589793 * progress));
}

LinearLr::LinearLr(double lr, int64_t total_steps, int64_t warmup_steps)
    : lr_(lr), total_(total_steps), warmup_(warmup_steps) {
  EMBER_CHECK(total_steps > 0 && warmup_steps >= 1 && warmup_steps <= total_steps, ValueError,
              "LinearLr: need 1 <= warmup_steps <= total_steps, got warmup ", warmup_steps, " of ", total_steps);
}

double LinearLr::lr_at(int64_t step) const {
  if (step < warmup_) return warmup_lr(lr_, step, warmup_);
  if (total_ == warmup_) return 0;
  return lr_ * std::max(0.0, static_cast<double>(total_ - step) / static_cast<double>(total_ - warmup_));
}

}  // namespace ember::optim
