// Host convolution: im2col of a few images at a time into a reused buffer, one OpenBLAS GEMM per chunk, the chunks
// (or, for the weight gradient, groups of them) run as tasks of the host pool. Where the AVX-512 build runs, the
// float forward and weight gradient of layers 64+ deep use ember's own products instead (kernels/cpu/conv_packed.h).
#include "kernels/conv.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/conv_packed.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/stream_store.h"
#include "kernels/linear.h"

namespace ember::kernels {

namespace detail {

void check_conv2d_geometry(const char* name, const Conv2dGeometry& g) {
  EMBER_CHECK(g.N >= 0 && g.C > 0 && g.H > 0 && g.W > 0 && g.OC > 0 && g.KH > 0 && g.KW > 0, ValueError, name,
              ": sizes must be positive (N may be 0), got input (", g.N, ", ", g.C, ", ", g.H, ", ", g.W,
              ") and weight (", g.OC, ", ", g.C, ", ", g.KH, ", ", g.KW, ")");
  EMBER_CHECK(g.stride_h > 0 && g.stride_w > 0 && g.pad_h >= 0 && g.pad_w >= 0, ValueError, name,
              ": stride must be positive and padding non-negative, got stride (", g.stride_h, ", ", g.stride_w,
              ") padding (", g.pad_h, ", ", g.pad_w, ")");
  EMBER_CHECK(g.H + 2 * g.pad_h >= g.KH && g.W + 2 * g.pad_w >= g.KW, ValueError, name, ": the ", g.KH, "x", g.KW,
              " kernel does not fit the padded ", g.H + 2 * g.pad_h, "x", g.W + 2 * g.pad_w, " input");
}

}  // namespace detail

namespace cpu {
namespace {

// Images per GEMM: about this many columns (chunk * OH * OW), 2 images of conv1 and 8 of conv2 in the
// default CNN. Timings were flat within noise from 784 to 12544 columns (docs/benchmarks.md, "conv").
constexpr int64_t kTargetColumns = 1568;

int64_t images_per_chunk(const Conv2dGeometry& g) {
  const int64_t P = g.OH() * g.OW();
  return std::clamp<int64_t>(kTargetColumns / std::max<int64_t>(P, 1), 1, std::max<int64_t>(g.N, 1));
}

// A growable per-thread buffer per slot, so steady-state training allocates nothing.
template <typename T> T* scratch(int slot, size_t n) {
  thread_local std::vector<T> buffers[3];
  auto& b = buffers[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// The output columns [lo, hi) whose input column ow * stride - pad + k lies inside [0, W).
struct ValidRange {
  int64_t lo, hi;
};
ValidRange valid_columns(int64_t OW, int64_t W, int64_t stride, int64_t pad, int64_t k) {
  const int64_t first = pad - k;  // ow * stride >= first
  int64_t lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  int64_t hi = (W + pad - k + stride - 1) / stride;  // ow * stride < W + pad - k
  lo = std::min(lo, OW);
  hi = std::clamp(hi, lo, OW);
  return {lo, hi};
}

// col (C*KH*KW rows, OH*OW columns of one image starting at `col`, row stride ld) from one image.
template <typename T> void im2col(const Conv2dGeometry& g, const T* x, T* col, int64_t ld) {
  const int64_t OH = g.OH(), OW = g.OW();
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        T* row = col + ((c * g.KH + kh) * g.KW + kw) * ld;
        const ValidRange v = valid_columns(OW, g.W, g.stride_w, g.pad_w, kw);
        for (int64_t oh = 0; oh < OH; ++oh) {
          T* out = row + oh * OW;
          const int64_t ih = oh * g.stride_h - g.pad_h + kh;
          if (ih < 0 || ih >= g.H) {
            std::fill(out, out + OW, T(0));
            continue;
          }
          const T* in = x + (c * g.H + ih) * g.W;
          const int64_t shift = kw - g.pad_w;  // output column ow reads input column ow * stride + shift
          // Loops, not memset / memcpy: the rows are a few dozen bytes (14 floats in the CNN's second layer), where
          // the library calls cost more than the copy.
          for (int64_t ow = 0; ow < v.lo; ++ow) out[ow] = T(0);
          if (g.stride_w == 1)
            for (int64_t ow = v.lo; ow < v.hi; ++ow) out[ow] = in[ow + shift];
          else
            for (int64_t ow = v.lo; ow < v.hi; ++ow) out[ow] = in[ow * g.stride_w + shift];
          for (int64_t ow = v.hi; ow < OW; ++ow) out[ow] = T(0);
        }
      }
}

// dx (one image, overwritten) = the sum of every col entry into the pixel it was copied from.
template <typename T> void col2im(const Conv2dGeometry& g, const T* col, int64_t ld, T* dx) {
  const int64_t OH = g.OH(), OW = g.OW();
  std::fill(dx, dx + g.C * g.H * g.W, T(0));
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const T* row = col + ((c * g.KH + kh) * g.KW + kw) * ld;
        const ValidRange v = valid_columns(OW, g.W, g.stride_w, g.pad_w, kw);
        for (int64_t oh = 0; oh < OH; ++oh) {
          const int64_t ih = oh * g.stride_h - g.pad_h + kh;
          if (ih < 0 || ih >= g.H) continue;
          const T* in = row + oh * OW;
          T* out = dx + (c * g.H + ih) * g.W;
          const int64_t shift = kw - g.pad_w;
          if (g.stride_w == 1)  // a loop GCC vectorises: each pixel still gets its taps' adds in the same order
            for (int64_t ow = v.lo; ow < v.hi; ++ow) out[ow + shift] += in[ow];
          else
            for (int64_t ow = v.lo; ow < v.hi; ++ow) out[ow * g.stride_w + shift] += in[ow];
        }
      }
}

// Stride 1 with rows as wide as the input's (OW == W, "same" padding across): the OH rows of tap (kh, kw) then read
// one contiguous run of the input plane, moved by `offset` elements, so a tap is one long copy (or add) instead of OH
// short ones; only the rows above and below the plane and the columns off a row's edge need more.
bool plane_taps(const Conv2dGeometry& g) { return g.stride_h == 1 && g.stride_w == 1 && g.OW() == g.W; }

struct PlaneTap {
  int64_t first_row, end_row;  // output rows [first_row, end_row) read input rows inside the plane
  int64_t offset;              // output element q of those rows reads input element q + offset
  int64_t begin, end;          // the elements q whose input q + offset lies in the plane; the rest are off an edge
  ValidRange columns;          // the columns inside the plane (those outside are zero in im2col, dropped in col2im)
};

// Every tap's, in (kh, kw) order.
std::vector<PlaneTap> plane_taps_of(const Conv2dGeometry& g) {
  const int64_t OH = g.OH(), OW = g.OW();
  std::vector<PlaneTap> taps;
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      PlaneTap t;
      t.first_row = std::clamp<int64_t>(g.pad_h - kh, 0, OH);
      t.end_row = std::clamp<int64_t>(g.H + g.pad_h - kh, t.first_row, OH);
      t.offset = (kh - g.pad_h) * g.W + (kw - g.pad_w);
      t.begin = std::max(t.first_row * OW, -t.offset);
      t.end = std::max(t.begin, std::min(t.end_row * OW, g.H * g.W - t.offset));
      t.columns = valid_columns(OW, g.W, 1, g.pad_w, kw);
      taps.push_back(t);
    }
  return taps;
}

// Zeroes the elements of rows [first_row, end_row) of one tap's row of col whose columns lie off the plane's edge,
// a column at a time: as row-wise loops GCC makes them memset calls of one element each.
template <typename T> void zero_edge_columns(const PlaneTap& t, int64_t OW, T* row) {
  auto zero_column = [&](int64_t ow) {
    for (int64_t oh = t.first_row; oh < t.end_row; ++oh) row[oh * OW + ow] = T(0);
  };
  for (int64_t ow = 0; ow < t.columns.lo; ++ow) zero_column(ow);
  for (int64_t ow = t.columns.hi; ow < OW; ++ow) zero_column(ow);
}

// im2col of one image by planes.
template <typename T>
void im2col_planes(const Conv2dGeometry& g, const std::vector<PlaneTap>& taps, const T* x, T* col, int64_t ld) {
  const int64_t OH = g.OH(), OW = g.OW(), KK = g.KH * g.KW;
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t k = 0; k < KK; ++k) {
      const PlaneTap& t = taps[static_cast<size_t>(k)];
      T* row = col + (c * KK + k) * ld;
      const T* in = x + c * g.H * g.W + t.offset;
      for (int64_t q = 0; q < t.first_row * OW; ++q) row[q] = T(0);
      for (int64_t q = t.begin; q < t.end; ++q) row[q] = in[q];  // [first_row * OW, begin) and [end, end_row * OW)
      zero_edge_columns(t, OW, row);                             // are off an edge, zeroed with the other columns
      for (int64_t q = t.end_row * OW; q < OH * OW; ++q) row[q] = T(0);
    }
}

// col2im of one image by planes: the entries off a row's edge are zeroed in col (scratch) first, so that each tap adds
// one contiguous run; an added +0 leaves a pixel's sum as it was (the sum starts at +0, so it never is -0), and each
// pixel gets its taps in the same order as col2im's, so the bits are col2im's.
template <typename T>
void col2im_planes(const Conv2dGeometry& g, const std::vector<PlaneTap>& taps, T* col, int64_t ld, T* dx) {
  const int64_t OW = g.OW(), KK = g.KH * g.KW;
  std::fill(dx, dx + g.C * g.H * g.W, T(0));
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t k = 0; k < KK; ++k) {
      const PlaneTap& t = taps[static_cast<size_t>(k)];
      T* row = col + (c * KK + k) * ld;
      T* out = dx + c * g.H * g.W + t.offset;
      zero_edge_columns(t, OW, row);
      for (int64_t q = t.begin; q < t.end; ++q) out[q] += row[q];
    }
}

// The per-image steps of one chunk of `chunk` images. A chunk's matrices are (rows, chunk * P) with image j
// at columns [j * P, (j + 1) * P). A chunk is one thread's task, so these loops stay serial.
template <typename T> void im2col_chunk(const Conv2dGeometry& g, const T* x, int64_t chunk, T* col) {
  const int64_t P = g.OH() * g.OW(), in_image = g.C * g.H * g.W;
  if (!plane_taps(g)) {
    for (int64_t j = 0; j < chunk; ++j) im2col(g, x + j * in_image, col + j * P, chunk * P);
    return;
  }
  const std::vector<PlaneTap> taps = plane_taps_of(g);
  for (int64_t j = 0; j < chunk; ++j) im2col_planes(g, taps, x + j * in_image, col + j * P, chunk * P);
}

// col is scratch: by planes, its entries off an edge are overwritten.
template <typename T> void col2im_chunk(const Conv2dGeometry& g, T* col, int64_t chunk, T* dx) {
  const int64_t P = g.OH() * g.OW(), in_image = g.C * g.H * g.W;
  if (!plane_taps(g)) {
    for (int64_t j = 0; j < chunk; ++j) col2im(g, col + j * P, chunk * P, dx + j * in_image);
    return;
  }
  const std::vector<PlaneTap> taps = plane_taps_of(g);
  for (int64_t j = 0; j < chunk; ++j) col2im_planes(g, taps, col + j * P, chunk * P, dx + j * in_image);
}

// rows (OC, chunk * P) from the chunk's NCHW gradient dy.
template <typename T> void gather_chunk(const Conv2dGeometry& g, const T* dy, int64_t chunk, T* rows) {
  const int64_t P = g.OH() * g.OW();
  for (int64_t j = 0; j < chunk; ++j)
    for (int64_t o = 0; o < g.OC; ++o)
      std::memcpy(rows + o * chunk * P + j * P, dy + (j * g.OC + o) * P, static_cast<size_t>(P) * sizeof(T));
}

// The chunk's NCHW output y from the product out (OC, chunk * P), adding the bias on the way; y streams to memory
// (the next layer reads it after the rest of the batch is done).
template <typename T> void scatter_chunk(const Conv2dGeometry& g, const T* out, const T* bias, int64_t chunk, T* y) {
  const int64_t P = g.OH() * g.OW(), cols = chunk * P;
  for (int64_t j = 0; j < chunk; ++j)
    for (int64_t o = 0; o < g.OC; ++o) {
      const T* src = out + o * cols + j * P;
      T* dst = y + (j * g.OC + o) * P;
      const T b = bias != nullptr ? bias[o] : T(0);
      stream_row(P, dst, [&](auto p) { return vecmath::load4(src + p) + b; }, [&](int64_t p) { return src[p] + b; });
    }
}

// sums[o] += the sum of row o of rows (OC, cols): eight float lanes per row (vectorised), then double.
template <typename T> void add_row_sums(const T* rows, int64_t OC, int64_t cols, double* sums) {
  constexpr int kLanes = 8;
  for (int64_t o = 0; o < OC; ++o) {
    const T* r = rows + o * cols;
    T lanes[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= cols; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] += r[i + j];
    double s = 0;
    for (; i < cols; ++i) s += static_cast<double>(r[i]);
    for (int j = 0; j < kLanes; ++j) s += static_cast<double>(lanes[j]);
    sums[o] += s;
  }
}

// The weight gradient's chunks fall into groups, a function of the sizes alone: group k sums its chunks' products
// in order into its own partial (dW's shape), and dW then adds the partials in group order. The groups are the
// tasks, so the threads share the work and the sum is the same at any thread count. At most kMaxWeightGroups
// groups, and at most kPartialElements elements of partials in all.
constexpr int64_t kMaxWeightGroups = 8;
constexpr int64_t kPartialElements = int64_t{1} << 22;

int64_t weight_groups(int64_t chunks, int64_t weight_elements) {
  return std::clamp<int64_t>(kPartialElements / std::max<int64_t>(weight_elements, 1), 1,
                             std::min(kMaxWeightGroups, std::max<int64_t>(chunks, 1)));
}

// Where the weight gradient runs ember's own product (kernels/cpu/conv_packed.h): the row stride of its transposed
// partials; elsewhere 0.
template <typename T> int64_t own_weight_stride(const Conv2dGeometry& g) {
#if EMBER_HOST_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (packed::weight_gradient_applies(g)) return packed::weight_gradient_stride(g.OC);
#endif
  (void)g;
  return 0;
}

// A group's partial (first: it holds nothing yet) += the chunk's product dy (OC, cols) @ col^T (cols, CKK): ember's
// own, transposed, or OpenBLAS's.
template <typename T>
void weight_product(const Conv2dGeometry& g, bool own, const T* rows, const T* col, int64_t cols, bool first,
                    T* partial) {
#if EMBER_HOST_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (own) return packed::avx512::weight_gradient_chunk(g.OC, g.CKK(), cols, rows, col, first, partial);
#endif
  (void)own;
  gemm<T>(false, true, g.OC, g.CKK(), cols, T(1), rows, cols, col, cols, first ? T(0) : T(1), partial, g.CKK(),
          nullptr, Epilogue::None);
}

// ember's own input-gradient product where it runs (kernels/cpu/conv_packed.h), planned once a call; else none.
struct OwnInput {
#if EMBER_HOST_AVX512
  std::optional<packed::InputPlan> plan;
#endif
};

template <typename T> OwnInput own_input(const Conv2dGeometry& g, const T* weight) {
  OwnInput own;
#if EMBER_HOST_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (packed::input_gradient_applies(g)) own.plan = packed::input_plan(g, weight);
#endif
  (void)g, (void)weight;
  return own;
}

// The chunk's input gradient dx (chunk images, overwritten) from its gathered gradient rows (OC, cols): ember's own
// product, or col (CKK, cols) = weight^T (CKK, OC) @ rows, then col2im (col is scratch).
template <typename T>
void input_gradient_chunk(const Conv2dGeometry& g, const OwnInput& own, const T* weight, const T* rows, int64_t chunk,
                          T* col, T* dx) {
#if EMBER_HOST_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (own.plan) return packed::avx512::input_gradient_chunk(*own.plan, rows, chunk, dx);
#endif
  (void)own;
  const int64_t CKK = g.CKK(), cols = chunk * g.OH() * g.OW();
  gemm<T>(true, false, CKK, cols, g.OC, T(1), weight, CKK, rows, cols, T(0), col, cols, nullptr, Epilogue::None);
  col2im_chunk(g, col, chunk, dx);
}

}  // namespace

template <typename T> void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* weight, const T* bias, T* y) {
  detail::check_conv2d_geometry("cpu::conv2d_forward", g);
  const int64_t P = g.OH() * g.OW(), CKK = g.CKK(), in_image = g.C * g.H * g.W, nb = images_per_chunk(g);
#if EMBER_HOST_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (packed::forward_applies(g)) {  // ember's own product, packed straight from x (kernels/cpu/conv_packed.h)
      const packed::Plan plan = packed::forward_plan(g, weight);
      parallel_for(chunk_count(g.N, nb), [&](int64_t i) {
        const int64_t n0 = i * nb;
        packed::avx512::forward_chunk(plan, x + n0 * in_image, bias, std::min(nb, g.N - n0), y + n0 * g.OC * P);
      });
      return;
    }
#endif
  // Chunks are independent: each is a task, run end to end by one thread with its own buffers (the chunk's GEMM and
  // per-image steps then run inline, in the same tiles as on the calling thread).
  parallel_for(chunk_count(g.N, nb), [&](int64_t i) {
    const int64_t n0 = i * nb, chunk = std::min(nb, g.N - n0), cols = chunk * P;
    T* col = scratch<T>(0, static_cast<size_t>(CKK * nb * P));
    T* out = scratch<T>(1, static_cast<size_t>(g.OC * nb * P));
    im2col_chunk(g, x + n0 * in_image, chunk, col);
    gemm<T>(false, false, g.OC, cols, CKK, T(1), weight, CKK, col, cols, T(0), out, cols, nullptr, Epilogue::None);
    scatter_chunk(g, out, bias, chunk, y + n0 * g.OC * P);
    stream_fence();
  });
}

template <typename T> void conv2d_backward_input(const Conv2dGeometry& g, const T* dy, const T* weight, T* dx) {
  detail::check_conv2d_geometry("cpu::conv2d_backward_input", g);
  const int64_t P = g.OH() * g.OW(), CKK = g.CKK(), in_image = g.C * g.H * g.W, nb = images_per_chunk(g);
  const OwnInput own = own_input(g, weight);
  parallel_for(chunk_count(g.N, nb), [&](int64_t i) {  // independent chunks, as in the forward
    const int64_t n0 = i * nb, chunk = std::min(nb, g.N - n0);
    T* col = scratch<T>(0, static_cast<size_t>(CKK * nb * P));
    T* rows = scratch<T>(1, static_cast<size_t>(g.OC * nb * P));
    gather_chunk(g, dy + n0 * g.OC * P, chunk, rows);
    input_gradient_chunk(g, own, weight, rows, chunk, col, dx + n0 * in_image);
  });
}

template <typename T>
void conv2d_backward_weight(const Conv2dGeometry& g, const T* x, const T* dy, T* dweight, T* dbias) {
  conv2d_backward<T>(g, x, dy, nullptr, dweight, dbias, nullptr);
}

template <typename T>
void conv2d_backward(const Conv2dGeometry& g, const T* x, const T* dy, const T* weight, T* dweight, T* dbias, T* dx) {
  detail::check_conv2d_geometry(dx != nullptr ? "cpu::conv2d_backward" : "cpu::conv2d_backward_weight", g);
  const int64_t P = g.OH() * g.OW(), CKK = g.CKK(), in_image = g.C * g.H * g.W, nb = images_per_chunk(g);
  if (g.N == 0) return;  // no images: dW and the bias gradient gain nothing
  const int64_t chunks = chunk_count(g.N, nb), weights = g.OC * CKK, groups = weight_groups(chunks, weights);
  // A group's partial: (OC, CKK), or (CKK, a stride of OC rounded up) transposed for ember's own product.
  const int64_t stride = own_weight_stride<T>(g);
  const bool own = stride > 0;
  const int64_t partial_size = own ? CKK * stride : weights;
  T* partial = scratch<T>(2, static_cast<size_t>(groups * partial_size));  // the calling thread's; each group its own
  std::vector<double> bias_sum(static_cast<size_t>(groups * g.OC), 0.0);
  const OwnInput own_dx = dx != nullptr ? own_input(g, weight) : OwnInput{};
  parallel_for(groups, [&](int64_t k) {
    T* col = scratch<T>(0, static_cast<size_t>(CKK * nb * P));
    T* rows = scratch<T>(1, static_cast<size_t>(g.OC * nb * P));
    for (int64_t i = chunks * k / groups; i < chunks * (k + 1) / groups; ++i) {
      const int64_t n0 = i * nb, chunk = std::min(nb, g.N - n0), cols = chunk * P;
      im2col_chunk(g, x + n0 * in_image, chunk, col);
      gather_chunk(g, dy + n0 * g.OC * P, chunk, rows);
      weight_product(g, own, rows, col, cols, i == chunks * k / groups, partial + k * partial_size);
      if (dbias != nullptr) add_row_sums(rows, g.OC, cols, bias_sum.data() + k * g.OC);
      if (dx != nullptr) input_gradient_chunk(g, own_dx, weight, rows, chunk, col, dx + n0 * in_image);  // same rows
    }
  });
  parallel_chunks(weights, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t k = 0; k < groups; ++k) {
      const T* p = partial + k * partial_size;
      if (!own) {
        for (int64_t j = begin; j < end; ++j) dweight[j] += p[j];
        continue;
      }
      for (int64_t j = begin, o = begin / CKK, w = begin % CKK; j < end; ++j) {  // dweight[o][w] += p[w][o]
        dweight[j] += p[w * stride + o];
        if (++w == CKK) w = 0, ++o;
      }
    }
  });
  if (dbias != nullptr)
    for (int64_t o = 0; o < g.OC; ++o) {
      double total = 0;
      for (int64_t k = 0; k < groups; ++k) total += bias_sum[static_cast<size_t>(k * g.OC + o)];
      dbias[o] += static_cast<T>(total);
    }
}

#define EMBER_INSTANTIATE_CONV(T)                                                                      \
  template void conv2d_forward<T>(const Conv2dGeometry&, const T*, const T*, const T*, T*);            \
  template void conv2d_backward_input<T>(const Conv2dGeometry&, const T*, const T*, T*);               \
  template void conv2d_backward_weight<T>(const Conv2dGeometry&, const T*, const T*, T*, T*);          \
  template void conv2d_backward<T>(const Conv2dGeometry&, const T*, const T*, const T*, T*, T*, T*);
EMBER_INSTANTIATE_CONV(float)
EMBER_INSTANTIATE_CONV(double)
#undef EMBER_INSTANTIATE_CONV

}  // namespace cpu
}  // namespace ember::kernels
