// Host max pooling: a pass over each output window, the argmax kept; backward scatters into a zeroed dx.
#include "kernels/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/error.h"

namespace ember::kernels {

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

namespace cpu {
namespace {

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

}  // namespace

template <typename T> void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, int32_t* argmax) {
  detail::check_pool2d_geometry("cpu::max_pool2d_forward", g);
  const int64_t OH = g.OH(), OW = g.OW();
  for (int64_t plane = 0; plane < g.N * g.C; ++plane) {
    const T* in = x + plane * g.H * g.W;
    T* out = y + plane * OH * OW;
    int32_t* idx = argmax + plane * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const auto [value, where] = window_max(g, in, oh, ow);
        out[oh * OW + ow] = value;
        idx[oh * OW + ow] = static_cast<int32_t>(where);
      }
  }
}

template <typename T> void max_pool2d_backward(const Pool2dGeometry& g, const T* dy, const int32_t* argmax, T* dx) {
  detail::check_pool2d_geometry("cpu::max_pool2d_backward", g);
  const int64_t P = g.OH() * g.OW(), HW = g.H * g.W;
  std::fill(dx, dx + g.N * g.C * HW, T(0));
  for (int64_t plane = 0; plane < g.N * g.C; ++plane) {
    T* out = dx + plane * HW;
    const T* grad = dy + plane * P;
    const int32_t* idx = argmax + plane * P;
    for (int64_t p = 0; p < P; ++p) {
      EMBER_ASSERT(idx[p] >= 0 && idx[p] < HW, "max_pool2d_backward: argmax ", idx[p], " outside a plane of ", HW);
      out[idx[p]] += grad[p];
    }
  }
}

#define EMBER_INSTANTIATE_POOL(T)                                                                       \
  template void max_pool2d_forward<T>(const Pool2dGeometry&, const T*, T*, int32_t*);                   \
  template void max_pool2d_backward<T>(const Pool2dGeometry&, const T*, const int32_t*, T*);
EMBER_INSTANTIATE_POOL(float)
EMBER_INSTANTIATE_POOL(double)
#undef EMBER_INSTANTIATE_POOL

}  // namespace cpu
}  // namespace ember::kernels
