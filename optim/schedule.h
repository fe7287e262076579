// Learning-rate schedules as functions of the global step (like torch.optim.lr_scheduler, counted in steps), so
// a resumed run needs only its step to continue the schedule.
#pragma once

#include <cstdint>

namespace ember::optim {

// Learning rate as a function of the global step (0-based), so resuming needs only the step.
class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual double lr_at(int64_t step) const = 0;
};

class ConstantLr : public LrSchedule {
 public:
  explicit ConstantLr(double lr) : lr_(lr) {}
  double lr_at(int64_t) const override { return lr_; }

 private:
  double lr_;
};

// lr * gamma^(step / step_size), like torch.optim.lr_scheduler.StepLR counted in steps.
class StepLr : public LrSchedule {
 public:
  StepLr(double lr, int64_t step_size, double gamma);
  double lr_at(int64_t step) const override;

 private:
  double lr_;
  int64_t step_size_;
  double gamma_;
};

// Linear warmup from 0 over `warmup_steps`, then cosine decay to min_lr at total_steps.
class CosineLr : public LrSchedule {
 public:
  CosineLr(double lr, int64_t total_steps, int64_t warmup_steps = 0, double min_lr = 0);
  double lr_at(int64_t step) const override;

 private:
  double lr_, min_lr_;
  int64_t total_, warmup_;
};

// Linear warmup over `warmup_steps` (lr * (step + 1) / warmup_steps), then linear decay to 0 at total_steps: BERT's
// schedule, as the peer's LambdaLR computes it.
class LinearLr : public LrSchedule {
 public:
  LinearLr(double lr, int64_t total_steps, int64_t warmup_steps);
  double lr_at(int64_t step) const override;

 private:
  double lr_;
  int64_t total_, warmup_;
};

}  // namespace ember::optim
