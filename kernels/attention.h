// Scaled dot-product attention per (batch, head): softmax(scale * q k^T + masks) with dropout on the weights, times
// v. The forward saves each query row's logsumexp; the backward recomputes the weights from it, never from a stored
// (Tq, Tk) matrix. All arrays contiguous, (B, H, T, D) row-major.
#pragma once

#include <cstdint>

#include "kernels/common.h"
#include "kernels/philox.h"

namespace ember::kernels {

// The sizes and options both directions share.
struct AttentionDims {
  int64_t batch, heads, q_len, k_len, head_dim;  // B, H, Tq, Tk, D
  double scale;                                  // multiplies q . k (the op resolves PyTorch's default 1 / sqrt(D))
  bool causal;                                   // key j > query i is masked
  double dropout_p;                              // in [0, 1); kept weights are scaled by 1 / (1 - p)
  uint64_t seed;                                 // the dropout mask's Philox key
};

template <typename T>
struct AttentionForwardArgs {
  const T* q;                       // (B, H, Tq, D)
  const T* k;                       // (B, H, Tk, D)
  const T* v;                       // (B, H, Tk, D)
  const uint8_t* key_padding_mask;  // (B, Tk), nonzero = ignore that key; or null
  T* out;                           // (B, H, Tq, D)
  T* logsumexp;                     // (B, H, Tq): over the unmasked keys, -inf for a row with none
  AttentionDims dims;
};

template <typename T>
struct AttentionBackwardArgs {
  const T* grad_out;                // (B, H, Tq, D)
  const T* q;                       // (B, H, Tq, D)
  const T* k;                       // (B, H, Tk, D)
  const T* v;                       // (B, H, Tk, D)
  const uint8_t* key_padding_mask;  // (B, Tk) or null, as in the forward
  const T* out;                     // (B, H, Tq, D): the forward's
  const T* logsumexp;               // (B, H, Tq): the forward's
  T* dq;                            // (B, H, Tq, D), overwritten
  T* dk;                            // (B, H, Tk, D), overwritten
  T* dv;                            // (B, H, Tk, D), overwritten
  AttentionDims dims;
};

// Whether key j is hidden from query i of batch b (causal or padding); both twins ask this one question.
EMBER_HOST_DEVICE inline bool attention_masked(const AttentionDims& d, const uint8_t* key_padding_mask, int64_t b,
                                               int64_t i, int64_t j) {
  return (d.causal && j > i) || (key_padding_mask != nullptr && key_padding_mask[b * d.k_len + j] != 0);
}

// The dropout mask's element for weight (bh, i, j), bh = b * H + h: the index of its Philox word.
EMBER_HOST_DEVICE inline uint64_t attention_dropout_index(const AttentionDims& d, int64_t bh, int64_t i, int64_t j) {
  return static_cast<uint64_t>((bh * d.q_len + i) * d.k_len + j);
}

// The factor weight (bh, i, j) is multiplied by after dropout: 0 when dropped, 1 / (1 - p) when kept, 1 without
// dropout. The uniform is compared with p in T's own precision (as dropout_mask does), so the host and the device
// drop the same weights.
template <typename T>
EMBER_HOST_DEVICE inline T attention_keep_factor(const AttentionDims& d, int64_t bh, int64_t i, int64_t j) {
  if (d.dropout_p <= 0) return T(1);
  const uint32_t bits = philox_word(d.seed, attention_dropout_index(d, bh, i, j));
  T u;
  if constexpr (sizeof(T) == 4) u = uniform_float(bits);
  else u = uniform_double(bits);
  const T p = static_cast<T>(d.dropout_p);
  return u >= p ? T(1) / (T(1) - p) : T(0);
}

namespace cpu {
// The unfused reference: one task per (b, h), each owning its outputs, so the bits do not depend on the threads.
template <typename T> void attention_forward(const AttentionForwardArgs<T>& a);
template <typename T> void attention_backward(const AttentionBackwardArgs<T>& a);
}  // namespace cpu

namespace cuda {
// Flash-attention style, D <= kMaxHeadDim: a warp per query row walks the keys in shared-memory tiles with an
// online softmax (the running sum rescaled by exp(m_old - m_new) when the row maximum grows).
inline constexpr int64_t kAttentionMaxHeadDim = 128;
template <typename T> void attention_forward(const AttentionForwardArgs<T>& a, Stream stream);
// Two kernels, no atomics: dk and dv by the block that owns each key tile (walking the query rows), dq by a warp
// per query row (walking the key tiles); both recompute the weights from the logsumexp.
template <typename T> void attention_backward(const AttentionBackwardArgs<T>& a, Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
