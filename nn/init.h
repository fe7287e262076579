// Parameter initialisation as PyTorch's layers do it by default, drawn from ember's counter-based generator.
#pragma once

#include "core/generator.h"
#include "core/tensor.h"

namespace ember::nn {

// Uniform in (-bound, bound), the next numel(shape) values of `generator`'s stream (the same on any device).
// Linear and Conv2d take bound = 1/sqrt(fan_in): kaiming_uniform with a = sqrt(5) for the weight, and the bias.
Tensor uniform_init(const Shape& shape, double bound, DType dtype, Device device, Generator& generator);

}  // namespace ember::nn
