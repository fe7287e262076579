// dropout_mask: one dispatch to the host or CUDA counter-based generator.
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops/random.h"
#include "kernels/random.h"

namespace ember::ops {

namespace k = kernels;

Tensor dropout_mask(const Shape& shape, double p, uint64_t seed, uint64_t offset, DType dtype, Device device) {
  EMBER_CHECK(p >= 0 && p < 1, ValueError, "dropout probability must be in [0, 1), got ", p);
  Tensor mask = Tensor::empty(shape, dtype, device);
  if (device.is_meta()) return mask;
  visit_floating(dtype, "dropout_mask", [&](auto zero) {
    using T = decltype(zero);
    if (device.is_cpu()) k::cpu::dropout_mask<T>(mask.data<T>(), mask.numel(), seed, offset, T(p));
    else EMBER_CUDA_CALL(k::cuda::dropout_mask<T>(mask.data<T>(), mask.numel(), seed, offset, T(p), detail::stream_of(device)));
  });
  return mask;
}

}  // namespace ember::ops
