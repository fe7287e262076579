// The token layout moves of a Vision Transformer: cut images into patch rows (normalising each pixel on the way),
// and put one token in front of each sequence. Both twins compute each output element alone, from its index.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

// Images (batch, channels, height, width) cut into non-overlapping patch x patch squares: out (batch, patches,
// channels * patch * patch), patches row-major over the (height / patch, width / patch) grid, features (c, py, px)
// row-major inside a patch (PyTorch's x.unfold(2, p, p).unfold(3, p, p) order); each value is (x - mean) / std.
struct PatchifyArgs {
  int64_t batch, channels, height, width, patch;
  double mean, std;
};

// x (batch, tokens, dim) -> out (batch, tokens + 1, dim) with out[b, 0] = token (dim values, the same for every b,
// or token_stride = dim: row b of a (batch, dim) array) and out[b, 1 + t] = x[b, t].
struct PrependTokenArgs {
  int64_t batch, tokens, dim;
  int64_t token_stride;  // 0: one token for every sequence; dim: a token per sequence
};

namespace cpu {
template <typename T> void patchify(const T* x, T* out, const PatchifyArgs& a);
template <typename T> void prepend_token(const T* x, const T* token, T* out, const PrependTokenArgs& a);
}  // namespace cpu

namespace cuda {
template <typename T> void patchify(const T* x, T* out, const PatchifyArgs& a, Stream stream);
template <typename T> void prepend_token(const T* x, const T* token, T* out, const PrependTokenArgs& a, Stream stream);
}  // namespace cuda

namespace tokens_math {

// The image offset of output element i of patchify.
EMBER_HOST_DEVICE inline int64_t patch_source(int64_t i, const PatchifyArgs& a) {
  const int64_t features = a.channels * a.patch * a.patch, grid_w = a.width / a.patch;
  const int64_t per_image = (a.height / a.patch) * grid_w * features;
  const int64_t b = i / per_image, r = i % per_image;
  const int64_t p = r / features, f = r % features;
  const int64_t c = f / (a.patch * a.patch), py = (f / a.patch) % a.patch, px = f % a.patch;
  const int64_t y = (p / grid_w) * a.patch + py, x = (p % grid_w) * a.patch + px;
  return ((b * a.channels + c) * a.height + y) * a.width + x;
}

// Output element i of prepend_token: x's value, or the token's when it falls on a sequence's first row.
template <typename T> EMBER_HOST_DEVICE inline T prepended(int64_t i, const T* x, const T* token, const PrependTokenArgs& a) {
  const int64_t row = i / a.dim, d = i % a.dim, b = row / (a.tokens + 1), t = row % (a.tokens + 1);
  return t == 0 ? token[b * a.token_stride + d] : x[(b * a.tokens + t - 1) * a.dim + d];
}

}  // namespace tokens_math

}  // namespace ember::kernels
