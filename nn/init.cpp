// uniform_init: a reserved range of the generator's Philox stream, filled where the tensor lives.
#include "nn/init.h"

namespace ember::nn {

Tensor uniform_init(const Shape& shape, double bound, DType dtype, Device device, Generator& generator) {
  const uint64_t offset = generator.reserve(static_cast<uint64_t>(shape_numel(shape)));
  return Tensor::rand(shape, generator.seed(), dtype, device, -bound, bound, offset);
}

}  // namespace ember::nn
