// CPU twins of the random kernels on the Philox stream (kernels/philox.h).
#include "kernels/random.h"

#include <cmath>

#include "kernels/philox.h"

namespace ember::kernels::cpu {

namespace {

template <typename T>
T uniform01(uint64_t seed, uint64_t i) {
  if constexpr (sizeof(T) == 4) return uniform_float(philox_word(seed, i));
  else return uniform_double(philox_word(seed, i));
}

}  // namespace

template <typename T>
void uniform(T* out, int64_t n, uint64_t seed, uint64_t offset, T low, T high) {
  const T span = high - low;
  for (int64_t i = 0; i < n; ++i) out[i] = low + span * uniform01<T>(seed, offset + static_cast<uint64_t>(i));
}

template <typename T>
void normal(T* out, int64_t n, uint64_t seed, uint64_t offset, T mean, T std) {
  // Box-Muller on the word pair (2i, 2i+1); computed in double so host and device agree to rounding.
  for (int64_t i = 0; i < n; ++i) {
    uint64_t k = offset + 2 * static_cast<uint64_t>(i);
    double u1 = 1.0 - uniform_double(philox_word(seed, k));  // (0, 1]: log is finite
    double u2 = uniform_double(philox_word(seed, k + 1));
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    out[i] = static_cast<T>(mean + std * z);
  }
}

template <typename T>
void dropout_mask(T* mask, int64_t n, uint64_t seed, uint64_t offset, T p) {
  const T keep_scale = T(1) / (T(1) - p);
  for (int64_t i = 0; i < n; ++i)
    mask[i] = uniform01<T>(seed, offset + static_cast<uint64_t>(i)) >= p ? keep_scale : T(0);
}

#define EMBER_INSTANTIATE(T)                                              \
  template void uniform<T>(T*, int64_t, uint64_t, uint64_t, T, T);        \
  template void normal<T>(T*, int64_t, uint64_t, uint64_t, T, T);         \
  template void dropout_mask<T>(T*, int64_t, uint64_t, uint64_t, T);
EMBER_INSTANTIATE(float)
EMBER_INSTANTIATE(double)
#undef EMBER_INSTANTIATE

}  // namespace ember::kernels::cpu
