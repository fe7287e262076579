// Counter-based random tensors (kernels/random.h): the same values on the CPU and on CUDA.
#pragma once

#include "core/tensor.h"

namespace ember::ops {

// Inverted-dropout mask: 1/(1-p) where the stream's uniform value >= p, else 0.
Tensor dropout_mask(const Shape& shape, double p, uint64_t seed, uint64_t offset, DType dtype, Device device);

}  // namespace ember::ops
