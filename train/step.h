// One training step on one rank (DESIGN.md, "data flow of one training step"): forward, the fused softmax
// cross-entropy, backward with the gradients summed across ranks bucket by bucket as backward fills them, the
// non-finite check, and the optimizer's fused update at the schedule's learning rate.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "data/loader.h"
#include "distributed/ddp.h"
#include "nn/container.h"
#include "nn/loss.h"
#include "optim/optimizer.h"
#include "train/config.h"
#include "train/nonfinite.h"

namespace ember::train {

// Rank r of a data-parallel run draws its dropout masks r * this many words along the run's Philox stream; rank 0's
// position is the one a checkpoint saves.
inline constexpr uint64_t kRankStreamStride = uint64_t{1} << 48;

class Stepper {
 public:
  // Steps of `model` as `c` configures them; a resumed run passes its saved steps and optimizer state.
  Stepper(nn::Module& model, const TrainConfig& c, dist::Communicator& comm, int64_t steps_per_epoch,
          int64_t steps_done = 0, const optim::OptimizerState* resume = nullptr);

  struct Output {
    Tensor loss;     // 0-d: the global batch's mean loss (on the model's device)
    Tensor correct;  // 0-d int64: this rank's correct predictions
  };
  // The next step on `batch`, this rank's part of a global batch. Throws NumericalError (stop mode) once a checked
  // step had NaN/Inf.
  Output step(const data::Batch& batch);

  // How a batch reaches the model: model.forward(batch.x) unless set (BERT's takes batch.positions too). The
  // model's backward follows whatever forward ran.
  void set_forward(std::function<Tensor(const data::Batch&)> forward) { forward_ = std::move(forward); }

  int64_t steps_done() const { return step_; }
  double lr() const { return optimizer_->lr(); }
  const optim::Optimizer& optimizer() const { return *optimizer_; }
  const NonFiniteWatch& watch() const { return watch_; }
  const dist::GradientReducer& reducer() const { return reducer_; }

 private:
  nn::Module& model_;
  dist::Communicator& comm_;
  Device device_;
  int64_t steps_per_epoch_, step_;
  double peak_lr_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  NonFiniteWatch watch_;
  dist::GradientReducer reducer_;
  nn::CrossEntropyLoss loss_;
  std::function<Tensor(const data::Batch&)> forward_;
};

}  // namespace ember::train
