// Scaled dot-product attention (kernels/attention.h), PyTorch's F.scaled_dot_product_attention with a key
// padding mask and dropout on the attention weights: softmax(scale * q k^T + mask) v per (batch, head).
// On CUDA one fused kernel each way that never writes the (Tq, Tk) matrix to global memory (flash-attention
// style: online softmax, the row's logsumexp saved for backward); on the CPU the unfused twin, the reference.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ember::ops {

struct AttentionOptions {
  bool causal = false;    // key j > query i is masked (needs Tq == Tk)
  double scale = 0;       // 0: 1 / sqrt(D)
  double dropout_p = 0;   // on the attention weights, inverted (kept weights scaled by 1 / (1 - p)); 0 in eval
  uint64_t seed = 0;      // the dropout mask: weight (b, h, i, j) is dropped when
                          // uniform(philox_word(seed, ((b * H + h) * Tq + i) * Tk + j)) < dropout_p
};

struct AttentionResult {
  Tensor output;     // (B, H, Tq, D)
  Tensor logsumexp;  // (B, H, Tq): log sum_j exp(scale * s_ij) over the unmasked keys; -inf for a row with none
};

// q (B, H, Tq, D), k and v (B, H, Tk, D), one floating dtype and device (a non-contiguous argument is copied
// contiguous first); key_padding_mask undefined or uint8 (B, Tk) with nonzero = ignore that key (PyTorch's True).
// D >= 1, and on cuda D <= 128 (kernels::cuda::kAttentionMaxHeadDim). A query row whose keys are all masked gets
// zeros (never NaN) and passes no gradient. Errors: DeviceMismatchError, DTypeError, ShapeError (layout, D or B/H
// mismatch, causal with Tq != Tk, mask shape), ValueError (dropout_p outside [0, 1), a non-finite scale).
AttentionResult attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask,
                          const AttentionOptions& options = {});

struct AttentionGrads {
  Tensor q, k, v;
};
// dL/dq, dL/dk, dL/dv from dL/doutput, the forward's inputs, its result and the same options (the dropout mask
// is recomputed from the seed).
AttentionGrads attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& key_padding_mask, const AttentionResult& saved,
                                  const AttentionOptions& options = {});

}  // namespace ember::ops
