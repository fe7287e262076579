// Losses with forward and backward: CrossEntropyLoss (fused softmax + cross-entropy) and MSELoss.
#pragma once

#include "core/tensor.h"

namespace ember::nn {

// Mean cross-entropy of logits (B, C) against integer labels (B), like torch.nn.CrossEntropyLoss.
class CrossEntropyLoss {
 public:
  Tensor forward(const Tensor& logits, const Tensor& labels);  // 0-d loss on the logits' device
  // Gradient w.r.t. the logits of grad_loss * loss, from the last forward.
  Tensor backward(double grad_loss = 1) const;
  // The softmax probabilities of the last forward (B, C).
  const Tensor& probabilities() const { return probs_; }

 private:
  Tensor probs_, labels_;
};

// mean((prediction - target)^2), like torch.nn.MSELoss.
class MSELoss {
 public:
  Tensor forward(const Tensor& prediction, const Tensor& target);
  Tensor backward(double grad_loss = 1) const;

 private:
  Tensor diff_;
};

}  // namespace ember::nn
