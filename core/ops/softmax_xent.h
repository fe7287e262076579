// Softmax and the fused softmax cross-entropy over the last dim of 2-d tensors (kernels/softmax_xent.h).
#pragma once

#include "core/tensor.h"

namespace ember::ops {

Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
Tensor softmax_backward(const Tensor& y, const Tensor& grad_y);      // y = softmax(x)
Tensor log_softmax_backward(const Tensor& y, const Tensor& grad_y);  // y = log_softmax(x)

struct CrossEntropy {
  Tensor loss;   // 0-d, mean over the batch
  Tensor probs;  // (B, C) softmax, kept for the backward pass
};
// Mean softmax cross-entropy of logits (B, C) against integer labels (B) in [0, C). A label out of
// range throws ValueError (on cuda: at the next synchronisation, e.g. loss.item()).
CrossEntropy cross_entropy(const Tensor& logits, const Tensor& labels);
// d(grad_loss * loss)/d(logits) = (probs - onehot(labels)) * grad_loss / B.
Tensor cross_entropy_backward(const Tensor& probs, const Tensor& labels, double grad_loss = 1);

}  // namespace ember::ops
