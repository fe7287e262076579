// The layout moves of multi-head attention (kernels/heads.h): split the features of each token into heads, and
// merge them back. Each is the other's backward.
#pragma once

#include "core/tensor.h"

namespace ember::ops {

// x (B, T, parts * heads * D), contiguous or a view with unit stride in the last dim, floating: returns
// (parts, B, heads, T, D) contiguous, out[p, b, h, t, d] = x[b, t, (p * heads + h) * D + d]. parts = 3 splits a
// packed q|k|v projection in one pass.
Tensor split_heads(const Tensor& x, int64_t heads, int64_t parts = 1);
// The inverse: x (parts, B, heads, T, D) -> (B, T, parts * heads * D).
Tensor merge_heads(const Tensor& x);

}  // namespace ember::ops
