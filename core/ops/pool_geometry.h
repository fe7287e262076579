// The kernels' pooling geometry of an input shape and Pool2dParams, checked (ShapeError, ValueError naming `op`):
// shared by max_pool2d and the fused batch_norm_relu_pool (core/ops/batchnorm.h).
#pragma once

#include "core/ops/pool.h"
#include "kernels/pool.h"

namespace ember::ops::internal {

kernels::Pool2dGeometry pool_geometry(const char* op, const Shape& x, const Pool2dParams& p);

}  // namespace ember::ops::internal
