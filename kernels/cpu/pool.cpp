// Host max pooling: a pass over each output window, the argmax kept; backward scatters into a zeroed dx.
#include "kernels/pool.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/error.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/pool_plane.h"

namespace ember::kernels {

#if !defined(EMBER_ISA_AVX512)  // once, in the baseline build
namespace detail {

void check_pool2d_geometry(const char* name, const Pool2dGeometry& g) {
  EMBER_CHECK(g.N >= 0 && g.C > 0 && g.H > 0 && g.W > 0, ValueError, name,
              ": sizes must be positive (N may be 0), got input (", g.N, ", ", g.C, ", ", g.H, ", ", g.W, ")");
  EMBER_CHECK(g.KH > 0 && g.KW > 0 && g.stride_h > 0 && g.stride_w > 0, ValueError, name,
              ": kernel and stride must be positive, got kernel (", g.KH, ", ", g.KW, ") stride (", g.stride_h, ", ",
              g.stride_w, ")");
  EMBER_CHECK(g.pad_h >= 0 && g.pad_w >= 0 && 2 * g.pad_h <= g.KH && 2 * g.pad_w <= g.KW, ValueError, name,
              ": padding must be between 0 and half the kernel, got padding (", g.pad_h, ", ", g.pad_w,
              ") for kernel (", g.KH, ", ", g.KW, ")");
  EMBER_CHECK(g.H + 2 * g.pad_h >= g.KH && g.W + 2 * g.pad_w >= g.KW, ValueError, name, ": the ", g.KH, "x", g.KW,
              " window does not fit the padded ", g.H + 2 * g.pad_h, "x", g.W + 2 * g.pad_w, " input");
  EMBER_CHECK(g.H * g.W <= std::numeric_limits<int32_t>::max(), ValueError, name, ": a ", g.H, "x", g.W,
              " plane has more pixels than the int32 argmax can index");
}

}  // namespace detail
#endif

namespace cpu {

#if EMBER_HOST_AVX512 && !defined(EMBER_ISA_AVX512)
namespace avx512 {  // the entry points of this file's AVX-512 build (cpu/pool_avx512.cpp)
template <typename T> void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, int32_t* argmax);
template <typename T> void max_pool2d_backward(const Pool2dGeometry& g, const T* dy, const int32_t* argmax, T* dx);
}  // namespace avx512
#endif

EMBER_ISA_BEGIN
namespace {

constexpr int64_t kPlanesPerTask = 16;  // (image, channel) planes are split into tasks of the host pool

// The largest value of one output pixel's window and its index in the plane; the first NaN wins.
template <typename T>
std::pair<T, int64_t> window_max(const Pool2dGeometry& g, const T* plane, int64_t oh, int64_t ow) {
  const int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
  const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + g.KH, g.H);
  const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + g.KW, g.W);
  T best = -std::numeric_limits<T>::infinity();
  int64_t where = h_lo * g.W + w_lo;
  for (int64_t h = h_lo; h < h_hi; ++h)
    for (int64_t w = w_lo; w < w_hi; ++w) {
      const T v = plane[h * g.W + w];
      if (std::isnan(v)) return {v, h * g.W + w};
      if (v > best) {
        best = v;
        where = h * g.W + w;
      }
    }
  return {best, where};
}

// The winner of two window values where `a` comes first: b only if a is not NaN and b is larger or NaN, so
// the first NaN, else the first maximum, wins (the generic loop's rule).
template <typename T> inline bool second_wins(T a, T b) { return a == a && (b > a || b != b); }

// One output of a 2x2 window at stride 2 whose top-left input is (2 oh, w): a tree of second_wins picks
// what the generic row-by-row scan picks.
template <typename T>
inline void window_2x2(const T* r0, const T* r1, int64_t w, int32_t top_left, int32_t W, T* out, int32_t* idx) {
  const bool upper_b = second_wins(r0[w], r0[w + 1]), lower_d = second_wins(r1[w], r1[w + 1]);
  const T upper = upper_b ? r0[w + 1] : r0[w], lower = lower_d ? r1[w + 1] : r1[w];
  const bool take_lower = second_wins(upper, lower);
  *out = take_lower ? lower : upper;
  *idx = take_lower ? top_left + W + (lower_d ? 1 : 0) : top_left + (upper_b ? 1 : 0);
}

#if defined(__SSE2__)
// second_wins for four lanes at once, as an all-ones / all-zeros mask.
inline __m128 second_wins4(__m128 a, __m128 b) {
  return _mm_and_ps(_mm_cmpeq_ps(a, a), _mm_or_ps(_mm_cmpgt_ps(b, a), _mm_cmpneq_ps(b, b)));
}
inline __m128 select4(__m128 mask, __m128 if_set, __m128 if_clear) {
  return _mm_or_ps(_mm_and_ps(mask, if_set), _mm_andnot_ps(mask, if_clear));
}

// Four adjacent float outputs [ow, ow + 4) of one output row with SSE2 (x86-64's baseline), branch-free: random
// data made the scalar selects mispredict about every other window.
inline void windows_2x2_sse4(const float* r0, const float* r1, int64_t ow, int32_t top, int32_t W, float* out,
                             int32_t* idx) {
  const __m128i one = _mm_set1_epi32(1), row_below = _mm_set1_epi32(W);
  const int64_t w = 2 * ow;
  const __m128 t0 = _mm_loadu_ps(r0 + w), t1 = _mm_loadu_ps(r0 + w + 4);
  const __m128 b0 = _mm_loadu_ps(r1 + w), b1 = _mm_loadu_ps(r1 + w + 4);
  const __m128 a = _mm_shuffle_ps(t0, t1, _MM_SHUFFLE(2, 0, 2, 0)), b = _mm_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
  const __m128 c = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0)), d = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1));
  const __m128 upper_b = second_wins4(a, b), lower_d = second_wins4(c, d);
  const __m128 upper = select4(upper_b, b, a), lower = select4(lower_d, d, c);
  const __m128 take_lower = second_wins4(upper, lower);
  _mm_storeu_ps(out + ow, select4(take_lower, lower, upper));
  const __m128i col = _mm_add_epi32(_mm_set1_epi32(top + static_cast<int32_t>(w)), _mm_setr_epi32(0, 2, 4, 6));
  const __m128i upper_at = _mm_add_epi32(col, _mm_and_si128(_mm_castps_si128(upper_b), one));
  const __m128i lower_at = _mm_add_epi32(_mm_add_epi32(col, row_below), _mm_and_si128(_mm_castps_si128(lower_d), one));
  const __m128i lower_mask = _mm_castps_si128(take_lower);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(idx + ow),
                   _mm_or_si128(_mm_and_si128(lower_mask, lower_at), _mm_andnot_si128(lower_mask, upper_at)));
}

// A whole output row four outputs at a time. A row whose width is not a multiple of 4 (7 in the CNN's second
// pool) ends with four outputs that overlap the previous ones, written again with the same values, instead of a
// scalar tail. Returns how many outputs it wrote: OW, or 0 for a row narrower than 4.
int64_t windows_2x2_sse(const float* r0, const float* r1, int64_t OW, int32_t top, int32_t W, float* out, int32_t* idx) {
  if (OW < 4) return 0;
  for (int64_t ow = 0; ow + 4 <= OW; ow += 4) windows_2x2_sse4(r0, r1, ow, top, W, out, idx);
  if (OW % 4 != 0) windows_2x2_sse4(r0, r1, OW - 4, top, W, out, idx);
  return OW;
}

// The ReLU-masked backward of four adjacent 2x2 windows [ow, ow + 4) of one output row: each window's gradient,
// kept where its output is positive (as 0 + g, what the generic scatter into zeros stores), written at its argmax
// and zero at its other three pixels, interleaved back into the two input rows.
inline void unpool_2x2_sse4(const float* grad, const float* pooled, const int32_t* idx, int64_t ow, int32_t top,
                            int32_t W, float* r0, float* r1) {
  const __m128 positive = _mm_cmpgt_ps(_mm_loadu_ps(pooled + ow), _mm_setzero_ps());
  const __m128 v = _mm_add_ps(_mm_setzero_ps(), _mm_and_ps(positive, _mm_loadu_ps(grad + ow)));
  const __m128i col = _mm_add_epi32(_mm_set1_epi32(top + static_cast<int32_t>(2 * ow)), _mm_setr_epi32(0, 2, 4, 6));
  const __m128i at = _mm_sub_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(idx + ow)), col);
  auto where = [&](int32_t k) { return _mm_and_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(at, _mm_set1_epi32(k))), v); };
  const __m128 a = where(0), b = where(1), c = where(W), d = where(W + 1);
  _mm_storeu_ps(r0 + 2 * ow, _mm_unpacklo_ps(a, b));
  _mm_storeu_ps(r0 + 2 * ow + 4, _mm_unpackhi_ps(a, b));
  _mm_storeu_ps(r1 + 2 * ow, _mm_unpacklo_ps(c, d));
  _mm_storeu_ps(r1 + 2 * ow + 4, _mm_unpackhi_ps(c, d));
}
#endif

// The CNN's 2x2 windows at stride 2 without padding, without the generic loop's bounds arithmetic.
template <typename T> void pool_2x2(const Pool2dGeometry& g, const T* in, T* out, int32_t* idx) {
  const int64_t OH = g.OH(), OW = g.OW();
  const int32_t W = static_cast<int32_t>(g.W);
  for (int64_t oh = 0; oh < OH; ++oh) {
    const T* r0 = in + 2 * oh * g.W;
    const T* r1 = r0 + g.W;
    const int32_t top = static_cast<int32_t>(2 * oh * g.W);
    int64_t ow = 0;
#if defined(__SSE2__)
    if constexpr (std::is_same_v<T, float>) ow = windows_2x2_sse(r0, r1, OW, top, W, out + oh * OW, idx + oh * OW);
#endif
    for (; ow < OW; ++ow)
      window_2x2(r0, r1, 2 * ow, top + static_cast<int32_t>(2 * ow), W, out + oh * OW + ow, idx + oh * OW + ow);
  }
}

// The CNN's pooling: 2x2 windows at stride 2 without padding, which tile the plane.
bool tiles_2x2(const Pool2dGeometry& g) {
  return g.KH == 2 && g.KW == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 0 && g.pad_w == 0;
}

// out > 0 ? g : +0 by masking g's bits: GCC makes the select a branch, which a random mask mispredicts.
template <typename T> inline T where_positive(T out, T g) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const Bits keep = Bits(0) - static_cast<Bits>(out > T(0));
  return std::bit_cast<T>(std::bit_cast<Bits>(g) & keep);
}

}  // namespace

// One (image, channel) plane: the fast path for the CNN's windows, the generic loop for any other.
template <typename T> void max_pool2d_plane(const Pool2dGeometry& g, const T* in, T* out, int32_t* idx) {
  const int64_t OH = g.OH(), OW = g.OW();
  if (tiles_2x2(g)) return pool_2x2(g, in, out, idx);
  for (int64_t oh = 0; oh < OH; ++oh)
    for (int64_t ow = 0; ow < OW; ++ow) {
      const auto [value, where] = window_max(g, in, oh, ow);
      out[oh * OW + ow] = value;
      idx[oh * OW + ow] = static_cast<int32_t>(where);
    }
}

template <typename T>
void relu_max_pool2d_plane_backward(const Pool2dGeometry& g, const T* grad, const T* pooled, const int32_t* idx, T* out) {
  const int64_t OH = g.OH(), OW = g.OW(), W = g.W, HW = g.H * g.W;
#if defined(__SSE2__)
  // The CNN's 2x2 tiles, a window of four at a time (the last four of a row overlapping the previous ones, as in
  // the forward); the pixels past the last tile (odd H or W) get zeros.
  if (std::is_same_v<T, float> && tiles_2x2(g) && OW >= 4) {
    const float* gf = reinterpret_cast<const float*>(grad);
    const float* pf = reinterpret_cast<const float*>(pooled);
    float* of = reinterpret_cast<float*>(out);
    for (int64_t oh = 0; oh < OH; ++oh) {
      float* r0 = of + 2 * oh * W;
      const int32_t top = static_cast<int32_t>(2 * oh * W), w = static_cast<int32_t>(W);
      const int64_t row = oh * OW;
      for (int64_t ow = 0; ow + 4 <= OW; ow += 4) unpool_2x2_sse4(gf + row, pf + row, idx + row, ow, top, w, r0, r0 + W);
      if (OW % 4 != 0) unpool_2x2_sse4(gf + row, pf + row, idx + row, OW - 4, top, w, r0, r0 + W);
      for (int64_t x = 2 * OW; x < W; ++x) r0[x] = r0[W + x] = 0.0f;
    }
    std::fill(of + 2 * OH * W, of + HW, 0.0f);
    return;
  }
#endif
  std::fill(out, out + HW, T(0));
  for (int64_t q = 0; q < OH * OW; ++q) {
    EMBER_ASSERT(idx[q] >= 0 && idx[q] < HW, "relu_max_pool2d_plane_backward: argmax ", idx[q], " outside a plane of ",
                 HW);
    out[idx[q]] += where_positive(pooled[q], grad[q]);
  }
}

template <typename T> void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, int32_t* argmax) {
  EMBER_ISA_DISPATCH(max_pool2d_forward<T>(g, x, y, argmax));
  detail::check_pool2d_geometry("cpu::max_pool2d_forward", g);
  parallel_chunks(g.N * g.C, kPlanesPerTask, [&](int64_t first, int64_t last) {
    for (int64_t plane = first; plane < last; ++plane)
      max_pool2d_plane(g, x + plane * g.H * g.W, y + plane * g.OH() * g.OW(), argmax + plane * g.OH() * g.OW());
  });
}

template <typename T> void max_pool2d_backward(const Pool2dGeometry& g, const T* dy, const int32_t* argmax, T* dx) {
  EMBER_ISA_DISPATCH(max_pool2d_backward<T>(g, dy, argmax, dx));
  detail::check_pool2d_geometry("cpu::max_pool2d_backward", g);
  const int64_t P = g.OH() * g.OW(), HW = g.H * g.W;
  parallel_chunks(g.N * g.C, kPlanesPerTask, [&](int64_t first, int64_t last) {
    std::fill(dx + first * HW, dx + last * HW, T(0));
    for (int64_t plane = first; plane < last; ++plane) {
      T* out = dx + plane * HW;
      const T* grad = dy + plane * P;
      const int32_t* idx = argmax + plane * P;
      for (int64_t p = 0; p < P; ++p) {
        EMBER_ASSERT(idx[p] >= 0 && idx[p] < HW, "max_pool2d_backward: argmax ", idx[p], " outside a plane of ", HW);
        out[idx[p]] += grad[p];
      }
    }
  });
}

#define EMBER_INSTANTIATE_POOL(T)                                                                       \
  template void max_pool2d_plane<T>(const Pool2dGeometry&, const T*, T*, int32_t*);                     \
  template void relu_max_pool2d_plane_backward<T>(const Pool2dGeometry&, const T*, const T*, const int32_t*, T*); \
  template void max_pool2d_forward<T>(const Pool2dGeometry&, const T*, T*, int32_t*);                   \
  template void max_pool2d_backward<T>(const Pool2dGeometry&, const T*, const int32_t*, T*);
EMBER_INSTANTIATE_POOL(float)
EMBER_INSTANTIATE_POOL(double)
#undef EMBER_INSTANTIATE_POOL

EMBER_ISA_END
}  // namespace cpu
}  // namespace ember::kernels
