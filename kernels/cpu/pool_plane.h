// One (image, channel) plane of max pooling, for the host kernels that pool a plane while it is in the cache
// (kernels/cpu/batchnorm.cpp's BatchNorm -> ReLU -> MaxPool2d): what max_pool2d_forward does per plane, and the
// backward with the ReLU's mask folded in.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/pool.h"

namespace ember::kernels::cpu {
EMBER_ISA_BEGIN  // each build of the kernels pools with its own build of these

// out and idx (OH * OW) from the plane `in` (H * W).
template <typename T> void max_pool2d_plane(const Pool2dGeometry& g, const T* in, T* out, int32_t* idx);
// out (H * W, overwritten): the gradient of ReLU -> max pooling on one plane (the same as pooling, then ReLU): each
// window's gradient where its output `pooled` is positive, added at its argmax into zeros.
template <typename T>
void relu_max_pool2d_plane_backward(const Pool2dGeometry& g, const T* grad, const T* pooled, const int32_t* idx, T* out);

EMBER_ISA_END
}  // namespace ember::kernels::cpu
