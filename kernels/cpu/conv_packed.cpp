// ember's own AVX-512 products for the float convolution's forward, weight gradient and input gradient
// (kernels/cpu/conv_packed.h).
// The planning runs on any x86-64; the kernels sit in a GCC target region (kernels/cpu/isa.h) and run only where the
// CPU has AVX-512.
#define EMBER_ISA_AVX512 1  // so that EMBER_ISA_BEGIN opens the AVX-512 region: this file has no baseline build
#include "kernels/cpu/conv_packed.h"

#if EMBER_HOST_AVX512
#include <immintrin.h>

#include <algorithm>

namespace ember::kernels::cpu::packed {
namespace {

constexpr int64_t kTileFilters = 8;        // filters a tile: their weights are broadcast one at a time
constexpr int kVectors = 3;                // vectors of 16 floats a tile row: 24 accumulators of the 32 registers
constexpr int64_t kPanel = 16 * kVectors;  // product columns (output pixels) a panel

// A tap's masks: bit l of masks[p] is whether output pixel p + l reads inside the plane (pixels past the last do not).
void add_tap_masks(const std::vector<bool>& inside, std::vector<uint16_t>& masks) {
  const size_t first = masks.size();
  masks.resize(first + inside.size());
  uint32_t bits = 0;
  for (size_t p = inside.size(); p-- > 0;) {  // masks[p] = inside[p] | masks[p + 1] << 1, 16 bits
    bits = (bits << 1 | (inside[p] ? 1u : 0u)) & 0xffffu;
    masks[first + p] = static_cast<uint16_t>(bits);
  }
}

}  // namespace

bool forward_applies(const Conv2dGeometry& g) {
  return host_isa() == HostIsa::avx512 && g.stride_h == 1 && g.stride_w == 1 && g.OW() == g.W &&
         g.OH() * g.OW() >= 16 && g.CKK() >= kMinDepth;
}

bool weight_gradient_applies(const Conv2dGeometry& g) { return host_isa() == HostIsa::avx512 && g.CKK() >= kMinDepth; }

int64_t weight_gradient_stride(int64_t filters) { return (filters + 15) / 16 * 16; }

int64_t depth_block(int64_t remaining) {
  constexpr int64_t kBlock = 448;
  if (remaining >= 2 * kBlock) return kBlock;
  if (remaining > kBlock) return (remaining / 2 + 15) / 16 * 16;
  return remaining;
}

Plan forward_plan(const Conv2dGeometry& g, const float* weight) {
  Plan plan;
  plan.filter_count = g.OC;
  plan.depth = g.CKK();
  const int64_t blocks = (g.OC + kTileFilters - 1) / kTileFilters;
  plan.filters.assign(static_cast<size_t>(blocks * plan.depth * kTileFilters), 0.0f);
  for (int64_t o = 0; o < g.OC; ++o)
    for (int64_t k = 0; k < plan.depth; ++k)
      plan.filters[static_cast<size_t>(((o / kTileFilters) * plan.depth + k) * kTileFilters + o % kTileFilters)] =
          weight[o * plan.depth + k];
  plan.planes = g.C;
  plan.plane = g.H * g.W;
  plan.image = g.C * plan.plane;
  plan.pixels = g.OH() * g.OW();
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {  // output (oh, ow) reads input (oh + kh - pad_h, ow + kw - pad_w)
      plan.offsets.push_back((kh - g.pad_h) * g.W + (kw - g.pad_w));
      std::vector<bool> inside(static_cast<size_t>(plan.pixels));
      for (int64_t p = 0; p < plan.pixels; ++p) {
        const int64_t ih = p / g.W + kh - g.pad_h, iw = p % g.W + kw - g.pad_w;
        inside[static_cast<size_t>(p)] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
      }
      add_tap_masks(inside, plan.masks);
    }
  return plan;
}

bool input_gradient_applies(const Conv2dGeometry& g) {
  return host_isa() == HostIsa::avx512 && g.stride_h == 1 && g.stride_w == 1 && g.OH() == g.H && g.OW() == g.W &&
         g.H * g.W >= 16 && g.C >= kTileFilters && g.OC <= kMaxInputFilters;
}

InputPlan input_plan(const Conv2dGeometry& g, const float* weight) {
  InputPlan plan;
  plan.channels = g.C;
  plan.filters = g.OC;
  plan.pixels = g.H * g.W;
  const int64_t taps = g.KH * g.KW, depth = taps * g.OC, blocks = (g.C + kTileFilters - 1) / kTileFilters;
  plan.weights.assign(static_cast<size_t>(blocks * depth * kTileFilters), 0.0f);
  for (int64_t o = 0; o < g.OC; ++o)
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t at = ((c / kTileFilters) * depth + t * g.OC + o) * kTileFilters + c % kTileFilters;
        plan.weights[static_cast<size_t>(at)] = weight[(o * g.C + c) * taps + t];
      }
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {  // output (oh, ow) read input (oh + kh - pad_h, ow + kw - pad_w)
      plan.offsets.push_back((kh - g.pad_h) * g.W + (kw - g.pad_w));
      std::vector<bool> inside(static_cast<size_t>(plan.pixels));
      for (int64_t p = 0; p < plan.pixels; ++p) {
        const int64_t oh = p / g.W - (kh - g.pad_h), ow = p % g.W - (kw - g.pad_w);
        inside[static_cast<size_t>(p)] = oh >= 0 && oh < g.OH() && ow >= 0 && ow < g.OW();
      }
      add_tap_masks(inside, plan.masks);
    }
  return plan;
}

EMBER_ISA_BEGIN
namespace {

// Where the 16 product columns from column q lie: from pixel `pixel` of image `image`, `here` of them in that image
// and the rest from pixel 0 of the next; `valid` has a bit for each column inside the product (0: all past it).
struct Span {
  int64_t image = 0, pixel = 0;
  int here = 0;
  __mmask16 valid = 0;
};

Span span_of(int64_t q, int64_t pixels, int64_t cols) {
  Span s;
  if (q >= cols) return s;
  s.image = q / pixels;
  s.pixel = q % pixels;
  s.here = static_cast<int>(std::min<int64_t>(16, pixels - s.pixel));
  s.valid = static_cast<__mmask16>(cols - q >= 16 ? 0xffffu : (1u << (cols - q)) - 1);
  return s;
}

// The panel (depth, 48) of the input x: row c * taps + t (im2col's order) holds plane c at tap t, span v's 16
// columns at 16 * v.
void pack_panel(const Plan& plan, const float* x, const Span (&spans)[kVectors], float* panel) {
  const int64_t taps = static_cast<int64_t>(plan.offsets.size());
  for (int v = 0; v < kVectors; ++v) {
    const Span& s = spans[v];
    float* out = panel + 16 * v;
    const float* first = x + s.image * plan.image + s.pixel;        // columns [0, here): this image
    const float* next = x + (s.image + 1) * plan.image - s.here;    // columns [here, 16): the next image's first pixels
    for (int64_t c = 0; c < plan.planes; ++c)
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t at = c * plan.plane + plan.offsets[static_cast<size_t>(t)];
        const uint16_t* masks = plan.masks.data() + t * plan.pixels;
        // A masked load reads no lane its mask leaves out: there a tap's offset may point outside the plane or x.
        const __mmask16 inside = static_cast<__mmask16>(masks[s.pixel] & s.valid);
        __m512 row = inside == 0xffff ? _mm512_loadu_ps(first + at) : _mm512_maskz_loadu_ps(inside, first + at);
        if (s.here < 16)
          row = _mm512_mask_loadu_ps(row, static_cast<__mmask16>((masks[0] << s.here) & s.valid), next + at);
        _mm512_storeu_ps(out + (c * taps + t) * kPanel, row);
      }
  }
}

// acc[r][v] = the sum over k in [k0, k1) of a(k, r) * b(k, v), each a chain of fused multiply-adds from 0 in k: the
// tiles of the three products (the broadcast a and the vectors b their operands).
template <int R, int NV, typename A, typename B>
__attribute__((always_inline)) inline void fma_chains(__m512 (&acc)[R][NV], int64_t k0, int64_t k1, const A& a,
                                                      const B& b) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = k0; k < k1; ++k) {
    __m512 bk[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bk[v] = b(k, v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 ar = _mm512_set1_ps(a(k, r));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(ar, bk[v], acc[r][v]);
    }
  }
}

struct Tile {
  __m512 acc[kTileFilters][kVectors];
};

// The chains of fma_chains over depths [k0, k1) for a tile's 8 rows (the weights a(k, r), e.g. 8 packed filters
// (depth, 8)) and 48 columns (the vectors b(k, v), e.g. a panel (depth, 48)), into the tile (first: it holds 0) or
// added to it: a depth block of the forward, a tap of the input gradient.
template <typename A, typename B>
void multiply(const A& a, const B& b, int64_t k0, int64_t k1, bool first, Tile& total) {
  Tile t;
  fma_chains(t.acc, k0, k1, a, b);
  for (int r = 0; r < kTileFilters; ++r)
    for (int v = 0; v < kVectors; ++v)
      total.acc[r][v] = _mm512_add_ps(first ? _mm512_setzero_ps() : total.acc[r][v], t.acc[r][v]);
}

// Rows [o0, o0 + count) of the tile, + the bias (none: + 0), into planes o0 ... of the chunk's NCHW y (`planes`
// planes of P pixels an image).
void store(const Tile& t, const float* bias, int64_t o0, int64_t count, int64_t planes, int64_t P,
           const Span (&spans)[kVectors], float* y) {
  const int64_t out_image = planes * P;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t o = o0 + r;
    const __m512 b = _mm512_set1_ps(bias != nullptr ? bias[o] : 0.0f);  // + 0 as the GEMM path's scatter adds
    for (int v = 0; v < kVectors; ++v) {
      const Span& s = spans[v];
      if (s.valid == 0) continue;
      const __m512 out = _mm512_add_ps(t.acc[r][v], b);
      float* row = y + s.image * out_image + o * P + s.pixel;
      if (s.here == 16 && s.valid == 0xffff) {
        _mm512_storeu_ps(row, out);
        continue;
      }
      _mm512_mask_storeu_ps(row, static_cast<__mmask16>(((1u << s.here) - 1) & s.valid), out);
      if (s.here < 16)
        _mm512_mask_storeu_ps(y + (s.image + 1) * out_image + o * P - s.here,
                              static_cast<__mmask16>((0xffffu << s.here) & s.valid), out);
    }
  }
}

// ---- the weight gradient ----

constexpr int kTileWeights = 6;  // im2col rows (weights of one filter) a tile: broadcast one at a time

inline __m512 unpacklo_pairs(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}
inline __m512 unpackhi_pairs(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}

// GCC 12's shuffle intrinsics start from a self-initialised "undefined" vector, which -Wmaybe-uninitialized reports
// once they are inlined (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// r[i] = column i of the 16 x 16 block whose rows r holds: neighbours, then pairs, then 128-bit quarters interleaved.
void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = unpacklo_pairs(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = unpackhi_pairs(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = unpacklo_pairs(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = unpackhi_pairs(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 4; ++i) {
      t[8 * h + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0x88);
      t[8 * h + 4 + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
  }
}

// out (cols, stride) = rows (filters, cols)^T, the filters past the last zero up to the stride.
void transpose_rows(const float* rows, int64_t filters, int64_t cols, int64_t stride, float* out) {
  for (int64_t q = 0; q < cols; q += 16) {
    const int n = static_cast<int>(std::min<int64_t>(16, cols - q));
    const __mmask16 columns = static_cast<__mmask16>(n == 16 ? 0xffffu : (1u << n) - 1);
    for (int64_t o = 0; o < stride; o += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i)
        r[i] = o + i < filters ? _mm512_maskz_loadu_ps(columns, rows + (o + i) * cols + q) : _mm512_setzero_ps();
      transpose16(r);
      for (int i = 0; i < n; ++i) _mm512_storeu_ps(out + (q + i) * stride + o, r[i]);
    }
  }
}
#pragma GCC diagnostic pop

// out rows [0, weights) (stride apart, NV vectors of filters from the first) (+)= the sums over columns [q0, q1) of
// col row w times the transposed gradient's filters; col_rows holds kTileWeights rows (the unused ones repeat a row).
template <int NV>
void weight_tile(const float* const (&col_rows)[kTileWeights], const float* dyt, int64_t stride, int64_t q0, int64_t q1,
                 int weights, bool first, float* out) {
  __m512 acc[kTileWeights][NV];
  fma_chains(
      acc, q0, q1, [&col_rows](int64_t q, int i) { return col_rows[i][q]; },
      [dyt, stride](int64_t q, int v) { return _mm512_loadu_ps(dyt + q * stride + 16 * v); });
#pragma GCC unroll 6
  for (int i = 0; i < kTileWeights; ++i) {
    if (i >= weights) break;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* p = out + i * stride + 16 * v;
      _mm512_storeu_ps(p, _mm512_add_ps(first ? _mm512_setzero_ps() : _mm512_loadu_ps(p), acc[i][v]));
    }
  }
}

}  // namespace

void forward_chunk(const Plan& plan, const float* x, const float* bias, int64_t chunk, float* y) {
  const int64_t cols = chunk * plan.pixels;
  thread_local std::vector<float> buffer;  // the panel: 55 KB for 288-deep filters
  if (buffer.size() < static_cast<size_t>(plan.depth * kPanel)) buffer.resize(static_cast<size_t>(plan.depth * kPanel));
  for (int64_t q0 = 0; q0 < cols; q0 += kPanel) {
    Span spans[kVectors];
    for (int v = 0; v < kVectors; ++v) spans[v] = span_of(q0 + 16 * v, plan.pixels, cols);
    pack_panel(plan, x, spans, buffer.data());
    for (int64_t o0 = 0; o0 < plan.filter_count; o0 += kTileFilters) {
      const float* filters = plan.filters.data() + o0 * plan.depth;
      const float* panel = buffer.data();
      Tile t;
      for (int64_t k0 = 0; k0 < plan.depth; k0 += depth_block(plan.depth - k0))
        multiply([filters](int64_t k, int r) { return filters[k * kTileFilters + r]; },
                 [panel](int64_t k, int v) { return _mm512_loadu_ps(panel + k * kPanel + 16 * v); }, k0,
                 k0 + depth_block(plan.depth - k0), k0 == 0, t);
      store(t, bias, o0, std::min(kTileFilters, plan.filter_count - o0), plan.filter_count, plan.pixels, spans, y);
    }
  }
}

void weight_gradient_chunk(int64_t filters, int64_t CKK, int64_t cols, const float* rows, const float* col, bool first,
                           float* partial_t) {
  const int64_t stride = weight_gradient_stride(filters);
  thread_local std::vector<float> buffer;  // the gradient transposed: 400 KB for 64 filters and 1568 columns
  if (buffer.size() < static_cast<size_t>(cols * stride)) buffer.resize(static_cast<size_t>(cols * stride));
  transpose_rows(rows, filters, cols, stride, buffer.data());
  for (int64_t q0 = 0; q0 < cols; q0 += depth_block(cols - q0)) {
    const int64_t q1 = q0 + depth_block(cols - q0);
    const bool block_first = first && q0 == 0;
    for (int64_t o0 = 0; o0 < stride; o0 += 64)
      for (int64_t w0 = 0; w0 < CKK; w0 += kTileWeights) {
        const int weights = static_cast<int>(std::min<int64_t>(kTileWeights, CKK - w0));
        const float* col_rows[kTileWeights];
        for (int i = 0; i < kTileWeights; ++i) col_rows[i] = col + (w0 + std::min(i, weights - 1)) * cols;
        const float* dyt = buffer.data() + o0;
        float* out = partial_t + w0 * stride + o0;
        switch (std::min<int64_t>(4, (stride - o0) / 16)) {
          case 4: weight_tile<4>(col_rows, dyt, stride, q0, q1, weights, block_first, out); break;
          case 3: weight_tile<3>(col_rows, dyt, stride, q0, q1, weights, block_first, out); break;
          case 2: weight_tile<2>(col_rows, dyt, stride, q0, q1, weights, block_first, out); break;
          default: weight_tile<1>(col_rows, dyt, stride, q0, q1, weights, block_first, out); break;
        }
      }
  }
}

// Eight channels of dx over a panel of 48 pixels: at each tap, the chains over the filters of weight (tap, filter, c)
// times dy at the tap's source pixel (0 off the plane: a masked load), added to the taps before in order.
void input_gradient_chunk(const InputPlan& plan, const float* rows, int64_t chunk, float* dx) {
  const int64_t P = plan.pixels, cols = chunk * P, taps = static_cast<int64_t>(plan.offsets.size());
  const int64_t depth = taps * plan.filters;
  for (int64_t q0 = 0; q0 < cols; q0 += kPanel) {
    Span spans[kVectors];
    for (int v = 0; v < kVectors; ++v) spans[v] = span_of(q0 + 16 * v, P, cols);
    for (int64_t c0 = 0; c0 < plan.channels; c0 += kTileFilters) {
      const float* w = plan.weights.data() + c0 * depth;  // the block of channels c0 ... (c0 / 8 * depth * 8)
      Tile total;
      for (int64_t t = 0; t < taps; ++t) {
        const uint16_t* masks = plan.masks.data() + t * P;
        __mmask16 inside[kVectors];
        const float* source[kVectors];  // filter 0's row at the panel's vector v, moved by the tap
        for (int v = 0; v < kVectors; ++v) {
          const Span& s = spans[v];  // lanes [0, here) in this image, the rest in the next (from its pixel 0)
          const uint32_t here = (masks[s.pixel] & ((1u << s.here) - 1)) | (uint32_t{masks[0]} << s.here);
          inside[v] = static_cast<__mmask16>(here & s.valid);
          source[v] = rows + q0 + 16 * v - plan.offsets[static_cast<size_t>(t)];
        }
        const int64_t k0 = t * plan.filters;  // depth k = k0 + filter
        multiply([w](int64_t k, int r) { return w[k * kTileFilters + r]; },
                 [&](int64_t k, int v) { return _mm512_maskz_loadu_ps(inside[v], source[v] + (k - k0) * cols); }, k0,
                 k0 + plan.filters, t == 0, total);
      }
      store(total, nullptr, c0, std::min(kTileFilters, plan.channels - c0), plan.channels, P, spans, dx);
    }
  }
}

EMBER_ISA_END
}  // namespace ember::kernels::cpu::packed
#endif
