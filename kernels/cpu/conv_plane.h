// The output planes of a convolution of few taps, computed where a fused host kernel needs them instead of read
// from memory (kernels/conv_block.h): for a layer such as the CNN's first, 9 multiply-adds an output, computing a
// plane costs less than writing it out and reading it back.
#pragma once

#include <cstdint>

#include "kernels/batchnorm.h"
#include "kernels/conv.h"

namespace ember::kernels::cpu {

// The batch x (N, C, H, W) with its zero border, (N, C, H + 2 pad_h, W + 2 pad_w), into `padded`.
void pad_images(const Conv2dGeometry& g, const float* x, float* padded);
// Plane (n, oc) of conv(x, weight) + bias (bias may be null) into out (OH * OW), from pad_images' batch. Each output
// is the fused multiply-add chain over its taps in im2col's order, from 0, then the bias added: the bits of the GEMM
// path (conv2d_forward), whose OpenBLAS product sums a reduction this short in one such chain. AVX-512 where the CPU
// has it, the stride is 1 and the taps at most kConvBlockMaxTaps (kernels/batchnorm.h), else the same chain one output at a time.
void conv_plane(const Conv2dGeometry& g, const float* padded, const float* weight, const float* bias, int64_t n,
                int64_t oc, float* out);
// Whether conv_plane takes its vector path for g on this CPU.
bool conv_plane_vectorised(const Conv2dGeometry& g);
// Whether conv2d_forward's outputs are conv_plane's bits for g's sizes on this machine: OpenBLAS sums a short
// product as one chain in its AVX-512 kernels, but its AVX2 ones (OPENBLAS_CORETYPE=Haswell) sum some row blocks in
// another order (docs/benchmarks.md). Tried once per geometry on a batch of fixed values, then remembered.
bool conv_plane_matches_gemm(const Conv2dGeometry& g);

}  // namespace ember::kernels::cpu
