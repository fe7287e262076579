// Stepper::step: the step's kernels are queued; nothing here waits for the device.
#include "train/step.h"

#include "core/ops.h"

namespace ember::train {

Stepper::Stepper(nn::Module& model, const TrainConfig& c, dist::Communicator& comm, int64_t steps_per_epoch,
                 int64_t steps_done, const optim::OptimizerState* resume)
    : model_(model), comm_(comm), device_(c.device), steps_per_epoch_(steps_per_epoch), step_(steps_done),
      peak_lr_(c.lr), optimizer_(make_optimizer(c, model.parameters())), schedule_(make_schedule(c, steps_per_epoch)),
      watch_(model, c.device, c.skip_nonfinite), reducer_(comm, model, c.bucket_kb * 1024) {
  if (resume != nullptr) optimizer_->load_state_dict(*resume);
  // The optimizer kernels skip a flagged step's update themselves, so the host never waits for the GPU to decide.
  optimizer_->set_guard(&watch_.guard());
}

Stepper::Output Stepper::step(const data::Batch& batch) {
  optimizer_->set_lr(schedule_->lr_at(step_));
  optimizer_->zero_grad();
  Output out;
  if (batch.size() > 0) {
    const Tensor logits = forward_ ? forward_(batch) : model_.forward(batch.x);
    out.loss = loss_.forward(logits, batch.y);
    out.correct = ops::count_correct(logits, batch.y);
    // This rank's share of the global batch's mean loss: the ranks' gradients then sum to the whole batch's.
    model_.backward(loss_.backward(double(batch.size()) / double(batch.global_size)));
  } else {  // a last batch smaller than the number of ranks: this rank adds zero gradients
    out.loss = Tensor::zeros({}, DType::F32, device_);
    out.correct = Tensor::zeros({}, DType::I64, device_);
  }
  reducer_.finish();
  if (comm_.size() > 1) {
    // The global batch's mean loss, the same on every rank: the guard then decides alike everywhere (a loss
    // that is Inf on one rank only would otherwise stop or skip that rank alone).
    out.loss = ops::scale(out.loss, double(batch.size()) / double(batch.global_size));
    comm_.all_reduce_sum(out.loss);
  }
  watch_.check(++step_, out.loss);
  optimizer_->step();
  // Free to read (on CUDA it trails the device by the few steps queued ahead); exact on the CPU.
  watch_.stop_if_flagged(steps_per_epoch_, peak_lr_);
  return out;
}

}  // namespace ember::train
