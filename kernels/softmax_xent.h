// Softmax and log-softmax over the last dim (with backward), and the fused softmax-cross-entropy
// forward/backward. x and y are (rows, cols), contiguous; labels are int32 or int64.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

namespace cpu {
template <typename T> void softmax(const T* x, T* y, int64_t rows, int64_t cols);
template <typename T> void log_softmax(const T* x, T* y, int64_t rows, int64_t cols);
// dx = y * (dy - sum(dy * y)) per row, y the softmax output.
template <typename T> void softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols);
// dx = dy - exp(y) * sum(dy) per row, y the log-softmax output.
template <typename T> void log_softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols);
// probs = softmax(logits); row_loss[r] = logsumexp(logits[r]) - logits[r, label[r]].
// A label outside [0, cols) throws ValueError naming the row and the label.
template <typename T, typename L>
void softmax_xent_forward(const T* logits, const L* labels, T* probs, T* row_loss, int64_t rows, int64_t cols);
// grad_logits = (probs - onehot(labels)) * grad_scale; grad_scale is dloss / rows for a mean loss.
template <typename T, typename L>
void softmax_xent_backward(const T* probs, const L* labels, T grad_scale, T* grad_logits, int64_t rows, int64_t cols);
}  // namespace cpu

namespace cuda {
template <typename T> void softmax(const T* x, T* y, int64_t rows, int64_t cols, Stream stream);
template <typename T> void log_softmax(const T* x, T* y, int64_t rows, int64_t cols, Stream stream);
template <typename T> void softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols, Stream stream);
template <typename T>
void log_softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols, Stream stream);
// A kernel cannot throw: a label outside [0, cols) makes that row's loss NaN and stores the row
// index in *bad_row (the caller initialises it to -1 and checks it at its next synchronisation).
template <typename T, typename L>
void softmax_xent_forward(const T* logits, const L* labels, T* probs, T* row_loss, int64_t rows, int64_t cols,
                          int64_t* bad_row, Stream stream);
template <typename T, typename L>
void softmax_xent_backward(const T* probs, const L* labels, T grad_scale, T* grad_logits, int64_t rows, int64_t cols,
                           Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
