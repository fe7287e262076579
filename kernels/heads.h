// The layout moves of multi-head attention: split_heads copies x (B, T, parts * H * D), whose features are
// contiguous but whose tokens and batches may have any strides (a slice of a packed q|k|v projection, no copy),
// into (parts, B, H, T, D) contiguous, with out[p, b, h, t, d] = x[b, t, (p * H + h) * D + d]; merge_heads is the
// inverse. Each is the other's backward. Pure copies: both twins give the same bits.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

struct HeadsLayout {
  int64_t parts, batch, heads, tokens, head_dim;  // parts, B, H, T, D
  int64_t batch_stride, token_stride;             // of the (B, T, parts * H * D) side, in elements (features: 1)
};

namespace cpu {
// x: the (B, T, F) side, strided as the layout says; out: (parts, B, H, T, D) contiguous. Rows (b, t) cut into
// chunks of the host pool.
template <typename T> void split_heads(const T* x, T* out, const HeadsLayout& layout);
// x: (parts, B, H, T, D) contiguous; out: the (B, T, F) side, strided as the layout says.
template <typename T> void merge_heads(const T* x, T* out, const HeadsLayout& layout);
}  // namespace cpu

namespace cuda {
// A grid-stride loop over the contiguous side's elements: writes (split) or reads (merge) coalesced there, and
// runs of D contiguous elements on the strided side.
template <typename T> void split_heads(const T* x, T* out, const HeadsLayout& layout, Stream stream);
template <typename T> void merge_heads(const T* x, T* out, const HeadsLayout& layout, Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
