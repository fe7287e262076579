// conv_plane: one output plane of a convolution, each output one fused multiply-add chain over its taps.
#include "kernels/cpu/conv_plane.h"

#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define EMBER_CONV_PLANE_AVX512 1
#endif

namespace ember::kernels::cpu {
namespace {

int64_t padded_h(const Conv2dGeometry& g) { return g.H + 2 * g.pad_h; }
int64_t padded_w(const Conv2dGeometry& g) { return g.W + 2 * g.pad_w; }

// Any stride: one output at a time, std::fma rounding once per tap as the vector path's instruction does.
void conv_plane_scalar(const Conv2dGeometry& g, const float* image, const float* w, float b, float* out) {
  const int64_t PH = padded_h(g), PW = padded_w(g), OH = g.OH(), OW = g.OW();
  for (int64_t oh = 0; oh < OH; ++oh)
    for (int64_t ow = 0; ow < OW; ++ow) {
      float acc = 0.0f;
      const float* tap = w;
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t kh = 0; kh < g.KH; ++kh) {
          const float* in = image + (c * PH + oh * g.stride_h + kh) * PW + ow * g.stride_w;
          for (int64_t kw = 0; kw < g.KW; ++kw) acc = std::fma(*tap++, in[kw], acc);
        }
      out[oh * OW + ow] = acc + b;
    }
}

#if EMBER_CONV_PLANE_AVX512
// Stride 1: 16 outputs of a row per register, the row's tail under a mask (masked lanes load nothing). kTaps > 0
// fixes the taps at compile time (9: a 3x3 filter of one channel, the CNN's first), so the filter stays in registers.
template <int kTaps>
[[gnu::target("avx512f")]] void conv_plane_avx512(const Conv2dGeometry& g, const float* image, const float* w, float b,
                                                  float* out) {
  const int64_t PH = padded_h(g), PW = padded_w(g), OH = g.OH(), OW = g.OW(), taps = kTaps > 0 ? kTaps : g.CKK();
  __m512 weight[kConvBlockMaxTaps];
  int64_t offset[kConvBlockMaxTaps];  // tap k's input, relative to its output's, in im2col's (c, kh, kw) order
  for (int64_t k = 0; k < taps; ++k) {
    weight[k] = _mm512_set1_ps(w[k]);
    offset[k] = (k / (g.KH * g.KW) * PH + k / g.KW % g.KH) * PW + k % g.KW;
  }
  const __m512 bias = _mm512_set1_ps(b);
  for (int64_t oh = 0; oh < OH; ++oh) {
    const float* in = image + oh * PW;
    float* row = out + oh * OW;
    int64_t ow = 0;
    for (; ow + 16 <= OW; ow += 16) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t k = 0; k < taps; ++k) acc = _mm512_fmadd_ps(weight[k], _mm512_loadu_ps(in + ow + offset[k]), acc);
      _mm512_storeu_ps(row + ow, _mm512_add_ps(acc, bias));
    }
    if (ow < OW) {
      const __mmask16 lanes = __mmask16((1u << (OW - ow)) - 1);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t k = 0; k < taps; ++k)
        acc = _mm512_fmadd_ps(weight[k], _mm512_maskz_loadu_ps(lanes, in + ow + offset[k]), acc);
      _mm512_mask_storeu_ps(row + ow, lanes, _mm512_add_ps(acc, bias));
    }
  }
}
#endif

}  // namespace

void pad_images(const Conv2dGeometry& g, const float* x, float* padded) {
  const int64_t PH = padded_h(g), PW = padded_w(g);
  std::memset(padded, 0, static_cast<size_t>(g.N * g.C * PH * PW) * sizeof(float));
  for (int64_t plane = 0; plane < g.N * g.C; ++plane)
    for (int64_t h = 0; h < g.H; ++h)
      std::memcpy(padded + (plane * PH + h + g.pad_h) * PW + g.pad_w, x + (plane * g.H + h) * g.W,
                  static_cast<size_t>(g.W) * sizeof(float));
}

bool conv_plane_vectorised(const Conv2dGeometry& g) {
#if EMBER_CONV_PLANE_AVX512
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 && g.stride_h == 1 && g.stride_w == 1 && g.CKK() <= kConvBlockMaxTaps;
#else
  (void)g;
  return false;
#endif
}

namespace {

// Values in [-1, 1) from a fixed linear congruential sequence: the probe's batch, filters and bias.
std::vector<float> probe_values(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

// conv2d_forward against every plane of the chain on one batch of g's sizes.
bool probe(const Conv2dGeometry& g) {
  const std::vector<float> x = probe_values(g.N * g.C * g.H * g.W, 1), w = probe_values(g.OC * g.CKK(), 2),
                           b = probe_values(g.OC, 3);
  const int64_t P = g.OH() * g.OW();
  std::vector<float> y(static_cast<size_t>(g.N * g.OC * P)), plane(static_cast<size_t>(P)),
      padded(static_cast<size_t>(g.N * g.C * padded_h(g) * padded_w(g)));
  conv2d_forward<float>(g, x.data(), w.data(), b.data(), y.data());
  pad_images(g, x.data(), padded.data());
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t oc = 0; oc < g.OC; ++oc) {
      conv_plane(g, padded.data(), w.data(), b.data(), n, oc, plane.data());
      if (std::memcmp(plane.data(), y.data() + (n * g.OC + oc) * P, static_cast<size_t>(P) * sizeof(float)) != 0)
        return false;
    }
  return true;
}

}  // namespace

bool conv_plane_matches_gemm(const Conv2dGeometry& g) {
  static std::mutex mutex;
  static std::map<std::array<int64_t, 11>, bool> known;
  const std::array<int64_t, 11> key{g.N, g.C, g.H, g.W, g.OC, g.KH, g.KW, g.stride_h, g.stride_w, g.pad_h, g.pad_w};
  const std::lock_guard<std::mutex> lock(mutex);
  const auto it = known.find(key);
  if (it != known.end()) return it->second;
  return known[key] = probe(g);
}

void conv_plane(const Conv2dGeometry& g, const float* padded, const float* weight, const float* bias, int64_t n,
                int64_t oc, float* out) {
  const float* image = padded + n * g.C * padded_h(g) * padded_w(g);
  const float* w = weight + oc * g.CKK();
  const float b = bias != nullptr ? bias[oc] : 0.0f;  // the GEMM path adds 0 without a bias, turning -0 into +0
#if EMBER_CONV_PLANE_AVX512
  if (conv_plane_vectorised(g))
    return g.CKK() == 9 ? conv_plane_avx512<9>(g, image, w, b, out) : conv_plane_avx512<0>(g, image, w, b, out);
#endif
  conv_plane_scalar(g, image, w, b, out);
}

}  // namespace ember::kernels::cpu
