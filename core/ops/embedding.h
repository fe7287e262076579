// Embedding lookup, PyTorch's F.embedding (kernels/embedding.h): a gather of rows by integer ids and its
// scatter-add backward.
#pragma once

#include "core/tensor.h"

namespace ember::ops {

// weight (V, E) floating, ids int64 or int32 of any shape, on one device: returns (*ids.shape, E) with row
// ids[i] of weight. An id outside [0, V) is an IndexError naming it (on the CPU before any read; on CUDA the
// kernel reads nothing out of range and raises a device flag the op reports).
Tensor embedding(const Tensor& weight, const Tensor& ids);
// grad_weight (V, E) += the rows of grad_out (*ids.shape, E) added at their ids; repeated ids add up, with the
// same bits every run.
void embedding_backward_(Tensor& grad_weight, const Tensor& grad_out, const Tensor& ids);

}  // namespace ember::ops
