// Non-temporal stores for host kernels that write a large output the step reads only later (a convolution's output,
// BatchNorm's input gradient): each 64-byte line goes to memory without first being read into the cache, a third
// less memory traffic for a pass that reads one array and writes another, and the output no longer evicts what the
// kernel reads next. The values are those of plain stores; only float rows at a 16-byte address stream (SSE2), the
// rest and other types store as usual.
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/cpu/vecmath.h"

namespace ember::kernels::cpu {

// dst[i] = scalar_at(i) for i in [0, n); where the float row streams, four at a time from vector_at(i) (an f32x4 of
// dst[i, i + 4), the same arithmetic). The thread that stores ends its pass with stream_fence().
// Always inlined, so that the loop is compiled for its caller's ISA (kernels/cpu/isa.h).
template <typename T, typename Vector, typename Scalar>
[[gnu::always_inline]] inline void stream_row(int64_t n, T* dst, Vector vector_at, Scalar scalar_at) {
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    if (reinterpret_cast<uintptr_t>(dst) % 16 == 0)
      for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, static_cast<__m128>(vector_at(i)));
  }
#endif
  for (; i < n; ++i) dst[i] = scalar_at(i);
}

// Orders the calling thread's streamed stores before what it stores next (a task's end, a flag another thread reads).
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace ember::kernels::cpu
