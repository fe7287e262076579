// The default generator, and Philox bits for host code.
#include "core/generator.h"

#include "kernels/philox.h"

namespace ember {

uint64_t philox_bits(uint64_t key, uint64_t counter) {
  const kernels::Philox4 w = kernels::philox4x32_10(counter, key);
  return (static_cast<uint64_t>(w.v[0]) << 32) | w.v[1];
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

}  // namespace ember
