// Loss forward/backward on top of core/ops (the cross-entropy is one fused kernel each way).
#include "nn/loss.h"

#include "core/ops.h"

namespace ember::nn {

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& labels) {
  ops::CrossEntropy ce = ops::cross_entropy(logits, labels);
  probs_ = ce.probs;
  labels_ = labels;
  return ce.loss;
}

Tensor CrossEntropyLoss::backward(double grad_loss) const {
  EMBER_CHECK(probs_.defined(), ValueError, "CrossEntropyLoss: backward() called before forward()");
  return ops::cross_entropy_backward(probs_, labels_, grad_loss);
}

Tensor MSELoss::forward(const Tensor& prediction, const Tensor& target) {
  diff_ = ops::sub(prediction, target);
  return ops::mean(ops::mul(diff_, diff_));
}

Tensor MSELoss::backward(double grad_loss) const {
  EMBER_CHECK(diff_.defined(), ValueError, "MSELoss: backward() called before forward()");
  return ops::scale(diff_, 2.0 * grad_loss / static_cast<double>(diff_.numel()));
}

}  // namespace ember::nn
