// Reductions (kernels/reduce.h): deterministic sums, row sums, argmax, correct counts.
#pragma once

#include "core/tensor.h"

namespace ember::ops {

Tensor sum(const Tensor& x);   // 0-d tensor
Tensor mean(const Tensor& x);  // 0-d tensor
// Sum over dim 0 of a 2-d tensor: (rows, cols) -> (cols).
Tensor sum_rows(const Tensor& x);
// out = beta * out + sum over dim 0 of x, in place (bias gradients accumulate with beta = 1).
void sum_rows_(Tensor& out, const Tensor& x, double beta);
// Index of the largest value along the last dim of a 2-d tensor: (rows, cols) -> (rows) int64.
Tensor argmax(const Tensor& x);
// Number of rows whose argmax equals the label: a 0-d int64 tensor on the logits' device.
Tensor count_correct(const Tensor& logits, const Tensor& labels);

}  // namespace ember::ops
