// A Vision Transformer's token layout moves (kernels/tokens.h): images to normalised patch rows, and a token put in
// front of every sequence (the class token; with zeros for x it is also the backward of taking token 0).
#pragma once

#include "core/tensor.h"

namespace ember::ops {

// images (B, C, H, W) floating -> (B, (H / patch) * (W / patch), C * patch * patch), each value (x - mean) / std;
// patch must divide H and W, std > 0.
Tensor patchify(const Tensor& images, int64_t patch, double mean = 0, double std = 1);
// x (B, N, E) and token (E) (one for all) or (B, E) (one per sequence), one floating dtype and device ->
// (B, N + 1, E) with the token first.
Tensor prepend_token(const Tensor& x, const Tensor& token);

}  // namespace ember::ops
