// CPU twins of the copy kernels: strided gather into contiguous memory, and dtype casts.
#include "kernels/copy.h"

#include <cstdint>

namespace ember::kernels::cpu {

template <typename T>
void strided_copy(const T* src, StridedLayout layout, T* dst, int64_t n) {
  if (n <= 0) return;
  const int nd = layout.ndim;
  if (nd == 0) {
    dst[0] = src[0];
    return;
  }
  // Walk the index like an odometer; the innermost dim is a tight loop over a fixed stride.
  int64_t index[kMaxDims] = {};
  const int64_t inner = layout.sizes[nd - 1], inner_stride = layout.strides[nd - 1];
  int64_t base = 0;
  for (int64_t done = 0; done < n; done += inner) {
    const T* s = src + base;
    for (int64_t i = 0; i < inner; ++i) dst[done + i] = s[i * inner_stride];
    for (int d = nd - 2; d >= 0; --d) {  // advance the outer dims
      base += layout.strides[d];
      if (++index[d] < layout.sizes[d]) break;
      base -= layout.strides[d] * layout.sizes[d];
      index[d] = 0;
    }
  }
}

template <typename Src, typename Dst>
void cast(const Src* src, Dst* dst, int64_t n, double scale) {
  if (scale == 1.0) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(src[i]);
  } else if constexpr (sizeof(Src) <= 4 && sizeof(Dst) <= 4) {
    // Scaling u8 images to f32 is the hot case: stay in float so it vectorises.
    const float s = static_cast<float>(scale);
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(static_cast<float>(src[i]) * s);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(static_cast<double>(src[i]) * scale);
  }
}

#define EMBER_STRIDED(T) template void strided_copy<T>(const T*, StridedLayout, T*, int64_t);
EMBER_STRIDED(float)
EMBER_STRIDED(double)
EMBER_STRIDED(int32_t)
EMBER_STRIDED(int64_t)
EMBER_STRIDED(uint8_t)
#undef EMBER_STRIDED

#define EMBER_CAST(S, D) template void cast<S, D>(const S*, D*, int64_t, double);
#define EMBER_CAST_FROM(S) \
  EMBER_CAST(S, float) EMBER_CAST(S, double) EMBER_CAST(S, int32_t) EMBER_CAST(S, int64_t) EMBER_CAST(S, uint8_t)
EMBER_CAST_FROM(float)
EMBER_CAST_FROM(double)
EMBER_CAST_FROM(int32_t)
EMBER_CAST_FROM(int64_t)
EMBER_CAST_FROM(uint8_t)
#undef EMBER_CAST_FROM
#undef EMBER_CAST

}  // namespace ember::kernels::cpu
