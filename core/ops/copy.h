// Dtype conversion with a scale (kernels/copy.h): u8 images to f32, labels to int64.
#pragma once

#include "core/tensor.h"

namespace ember::ops {

// Dst(x * scale) on x's device: scale 1/255 turns u8 images into f32 in [0, 1].
Tensor cast(const Tensor& x, DType dtype, double scale = 1);
// The same into an existing contiguous tensor with as many elements (shapes may differ), on x's device.
void cast_(Tensor& out, const Tensor& x, double scale = 1);

}  // namespace ember::ops
