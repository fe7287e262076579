// Host batch normalisation: per channel, one pass for the statistics (double sums) and one to write;
// backward: one pass for both sums and one for dx.
#include "kernels/batchnorm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/pool_plane.h"
#include "kernels/cpu/stream_store.h"

#if defined(EMBER_ISA_AVX512)
#include <immintrin.h>
#endif

namespace ember::kernels {

#if !defined(EMBER_ISA_AVX512)  // once, in the baseline build
namespace detail {

void check_batch_norm(const char* name, const BatchNormGeometry& g, bool training, double eps) {
  EMBER_CHECK(g.N >= 0 && g.C > 0 && g.HW > 0, ValueError, name, ": sizes must be positive (N may be 0), got (N, C, H*W) = (",
              g.N, ", ", g.C, ", ", g.HW, ")");
  EMBER_CHECK(!training || g.N * g.HW >= 2, ValueError, name, ": expected more than 1 value per channel when training, got ",
              g.N * g.HW, " (N=", g.N, ", H*W=", g.HW, "); use a batch of at least 2 or eval mode");
  EMBER_CHECK(eps > 0, ValueError, name, ": eps must be positive, got ", eps);
}

}  // namespace detail
#endif

namespace cpu {

#if EMBER_HOST_AVX512 && !defined(EMBER_ISA_AVX512)
namespace avx512 {  // the entry points of this file's AVX-512 build (cpu/batchnorm_avx512.cpp)
template <typename T> void batch_norm_forward_train(const BatchNormGeometry& g, const BatchNormTrainArgs<T>& a);
template <typename T>
void batch_norm_forward_eval(const BatchNormGeometry& g, const T* x, const T* weight, const T* bias,
                             const T* running_mean, const T* running_var, T eps, bool relu, T* y, T* save_invstd);
template <typename T> void batch_norm_backward(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a);
template <typename T>
void batch_norm_relu_pool_forward_train(const Pool2dGeometry& p, const BatchNormTrainArgs<T>& a, int32_t* argmax);
template <typename T>
void batch_norm_relu_pool_forward_eval(const Pool2dGeometry& p, const T* x, const T* weight, const T* bias,
                                       const T* running_mean, const T* running_var, T eps, T* y, int32_t* argmax,
                                       T* save_invstd);
template <typename T>
void batch_norm_relu_pool_backward(const Pool2dGeometry& p, const BatchNormBackwardArgs<T>& a, const int32_t* argmax);
}  // namespace avx512
#endif

EMBER_ISA_BEGIN
namespace {

constexpr int kLanes = 16;        // independent float accumulators, so the sums vectorise without reassociation
constexpr int64_t kBlock = 1024;  // lanes flush into double every block: float error stays that of 1024 terms
constexpr int64_t kChannelsPerTask = 4;  // channels are split into tasks of the host pool; each is computed by one thread

// A channel's values are N rows of H*W, C*H*W apart: too short and too far apart for the hardware prefetcher, so each
// pass over a channel asks for the next image's row while it works on this one's.
template <typename T> inline void prefetch_next(const BatchNormGeometry& g, const T* row) {
  const T* next = row + g.C * g.HW;
  for (int64_t i = 0; i < g.HW; i += 64 / static_cast<int64_t>(sizeof(T))) __builtin_prefetch(next + i);
}

// The rows a backward pass reads next: x's, dy's and, with the fused ReLU, the forward's output.
template <bool kRelu, typename T> inline void prefetch_next_backward(const BatchNormGeometry& g, const T* x, const T* dy,
                                                                  const T* y) {
  prefetch_next(g, x);
  prefetch_next(g, dy);
  if constexpr (kRelu) prefetch_next(g, y);
}

// One register of T as a GCC vector, SSE2's in the baseline build and AVX-512's in the other: kLanes accumulators are
// kLanes / kWidth of them, and lane l of register v accumulates what scalar lane v * kWidth + l would, so the sums
// are those of a 16-lane scalar loop in both builds. (GCC left that scalar loop unvectorised: the fused ReLU's select
// and the 32 accumulators kept the gradient sums at 7 GB/s.)
#if defined(EMBER_ISA_AVX512)
constexpr int kVectorBytes = 64;
#else
constexpr int kVectorBytes = 16;
#endif
template <typename T> struct Register;
template <> struct Register<float> {
  typedef float type __attribute__((vector_size(kVectorBytes)));
};
template <> struct Register<double> {
  typedef double type __attribute__((vector_size(kVectorBytes)));
};
template <typename T> using Vec = typename Register<T>::type;
template <typename T> constexpr int kWidth = kVectorBytes / sizeof(T);
template <typename T> constexpr int kVectors = kLanes / kWidth<T>;
template <typename T> inline Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T> inline void flush(const Vec<T> (&lanes)[kVectors<T>], double* total) {
  for (int v = 0; v < kVectors<T>; ++v)
    for (int l = 0; l < kWidth<T>; ++l) *total += static_cast<double>(lanes[v][l]);
}

// Sums of d and d^2 for d = x - shift over one channel. Shifting by a value of the channel keeps the
// one-pass variance E[d^2] - E[d]^2 accurate when the mean is far from zero.
template <typename T>
void channel_sums(const BatchNormGeometry& g, const T* x, int64_t c, T shift, double* s1, double* s2) {
  double total1 = 0, total2 = 0;
  for (int64_t n = 0; n < g.N; ++n) {
    const T* row = x + (n * g.C + c) * g.HW;
    if (n + 1 < g.N) prefetch_next(g, row);
    for (int64_t start = 0; start < g.HW; start += kBlock) {
      const int64_t end = std::min(g.HW, start + kBlock);
      Vec<T> a[kVectors<T>] = {}, b[kVectors<T>] = {};
      int64_t i = start;
      for (; i + kLanes <= end; i += kLanes)
        for (int v = 0; v < kVectors<T>; ++v) {
          const Vec<T> d = load(row + i + v * kWidth<T>) - shift;
          a[v] += d;
          b[v] += d * d;
        }
      for (; i < end; ++i) {
        const T d = row[i] - shift;
        a[0][0] += d;
        b[0][0] += d * d;
      }
      flush<T>(a, &total1);
      flush<T>(b, &total2);
    }
  }
  *s1 = total1;
  *s2 = total2;
}

// dy[i], or 0 where the fused ReLU's output y[i] is not positive. Both loads happen unconditionally, so the
// compiler turns the choice into a blend and vectorises the loops that call this.
template <bool kRelu, typename T> inline T masked(const T* dy, const T* y, int64_t i) {
  if constexpr (!kRelu) return dy[i];
  const T d = dy[i], out = y[i];
  return out > T(0) ? d : T(0);
}

// Over one row of a channel: adds sum(g) and sum(g * (x - mean)) into the totals, for g = dy, masked by
// relu_output > 0 when kRelu.
template <bool kRelu, typename T>
void row_gradient_sums(int64_t HW, const T* x, const T* dy, const T* y, T mean, double* total_g, double* total_gx) {
  for (int64_t start = 0; start < HW; start += kBlock) {
    const int64_t end = std::min(HW, start + kBlock);
    Vec<T> p[kVectors<T>] = {}, q[kVectors<T>] = {};
    int64_t i = start;
    for (; i + kLanes <= end; i += kLanes)
      for (int v = 0; v < kVectors<T>; ++v) {
        const int64_t k = i + v * kWidth<T>;
        Vec<T> gi = load(dy + k);
        if constexpr (kRelu) gi = load(y + k) > Vec<T>{} ? gi : Vec<T>{};
        p[v] += gi;
        q[v] += gi * (load(x + k) - mean);
      }
    for (; i < end; ++i) {
      const T gi = masked<kRelu>(dy, y, i);
      p[0][0] += gi;
      q[0][0] += gi * (x[i] - mean);
    }
    flush<T>(p, total_g);
    flush<T>(q, total_gx);
  }
}

// What dx of one channel needs: dx = scale * (g - mean_g - (x - mean) * invstd * mean_gx), for one T or a Vec<T>.
template <typename T> struct InputGradient {
  T scale, mean_g, mean_gx, mean, invstd;
  template <typename V> V at(V g, V x) const { return scale * (g - mean_g - (x - mean) * invstd * mean_gx); }
};

template <bool kRelu, typename T>
void row_input_gradient(int64_t HW, const InputGradient<T>& k, const T* x, const T* dy, const T* y, T* dx) {
  for (int64_t i = 0; i < HW; ++i) {
    dx[i] = k.at(masked<kRelu>(dy, y, i), x[i]);
  }
}

// y = x * scale + shift over one row, then ReLU when asked.
template <typename T> void affine_row(int64_t HW, const T* in, T scale, T shift, bool relu, T* out) {
  if (relu) {
    for (int64_t i = 0; i < HW; ++i) {
      const T v = in[i] * scale + shift;
      out[i] = v < T(0) ? T(0) : v;
    }
  } else {
    for (int64_t i = 0; i < HW; ++i) out[i] = in[i] * scale + shift;
  }
}

template <typename T> void affine_channel(const BatchNormGeometry& g, const T* x, int64_t c, T scale, T shift, bool relu,
                                          T* y) {
  for (int64_t n = 0; n < g.N; ++n) {
    const T* in = x + (n * g.C + c) * g.HW;
    if (n + 1 < g.N) prefetch_next(g, in);
    affine_row(g.HW, in, scale, shift, relu, y + (n * g.C + c) * g.HW);
  }
}

// A channel's normalisation as one affine map, y = x * scale + shift.
template <typename T> struct Affine {
  T scale, shift;
};
template <typename T> Affine<T> affine_of(double mean, double invstd, const T* weight, const T* bias, int64_t c) {
  const double w = weight != nullptr ? static_cast<double>(weight[c]) : 1.0;
  const double b = bias != nullptr ? static_cast<double>(bias[c]) : 0.0;
  return {static_cast<T>(w * invstd), static_cast<T>(b - mean * w * invstd)};
}

// The batch statistics of channel c, saved and moved into the running ones; returns its map in training mode.
template <typename T> Affine<T> train_statistics(const BatchNormGeometry& g, const BatchNormTrainArgs<T>& a, int64_t c) {
  const double M = static_cast<double>(g.N * g.HW);
  const T shift = a.x[c * g.HW];
  double s1 = 0, s2 = 0;
  channel_sums(g, a.x, c, shift, &s1, &s2);
  const double mean_shifted = s1 / M;
  const double var = std::max(0.0, s2 / M - mean_shifted * mean_shifted);  // biased: what the batch is normalised with
  const double mean = static_cast<double>(shift) + mean_shifted;
  const double invstd = 1.0 / std::sqrt(var + static_cast<double>(a.eps));
  a.save_mean[c] = static_cast<T>(mean);
  a.save_invstd[c] = static_cast<T>(invstd);
  if (a.running_mean != nullptr) {
    const double m = static_cast<double>(a.momentum);
    a.running_mean[c] = static_cast<T>((1 - m) * static_cast<double>(a.running_mean[c]) + m * mean);
    a.running_var[c] = static_cast<T>((1 - m) * static_cast<double>(a.running_var[c]) + m * var * M / (M - 1));
  }
  return affine_of(mean, invstd, a.weight, a.bias, c);
}

// Channel c's map in eval mode, from the running statistics (1 / sqrt(running_var + eps) saved when asked).
template <typename T>
Affine<T> eval_affine(const T* weight, const T* bias, const T* running_mean, const T* running_var, T eps, T* save_invstd,
                      int64_t c) {
  const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + static_cast<double>(eps));
  if (save_invstd != nullptr) save_invstd[c] = static_cast<T>(invstd);
  return affine_of(static_cast<double>(running_mean[c]), invstd, weight, bias, c);
}

// From channel c's sums sum(g) and sum(g * (x - mean)): the parameter gradients, and what its dx needs.
template <typename T>
InputGradient<T> channel_gradients(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a, int64_t c, double sum_g,
                                   double sum_gx_centred) {
  const double M = static_cast<double>(g.N * g.HW);
  const double sum_gx = sum_gx_centred * static_cast<double>(a.invstd[c]);  // sum(g * xhat)
  if (a.dweight != nullptr) a.dweight[c] += static_cast<T>(sum_gx);
  if (a.dbias != nullptr) a.dbias[c] += static_cast<T>(sum_g);
  const T scale = (a.weight != nullptr ? a.weight[c] : T(1)) * a.invstd[c];
  // With batch statistics the mean and variance move with x: dx = scale * (g - mean(g) - xhat * mean(g xhat)).
  const T mean_g = a.batch_stats ? static_cast<T>(sum_g / M) : T(0);
  const T mean_gx = a.batch_stats ? static_cast<T>(sum_gx / M) : T(0);
  return {scale, mean_g, mean_gx, a.mean[c], a.invstd[c]};
}

// Both gradient sums of channel c, the parameter gradients, then dx.
template <bool kRelu, typename T>
void backward_channel(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a, int64_t c) {
  double sum_g = 0, sum_gx = 0;  // g is dy under the ReLU mask
  for (int64_t n = 0; n < g.N; ++n) {
    const int64_t base = (n * g.C + c) * g.HW;
    const T *x = a.x + base, *dy = a.dy + base, *y = kRelu ? a.relu_output + base : nullptr;
    if (n + 1 < g.N) prefetch_next_backward<kRelu>(g, x, dy, y);
    row_gradient_sums<kRelu>(g.HW, x, dy, y, a.mean[c], &sum_g, &sum_gx);
  }
  const InputGradient<T> k = channel_gradients(g, a, c, sum_g, sum_gx);
  for (int64_t n = 0; n < g.N; ++n) {
    const int64_t base = (n * g.C + c) * g.HW;
    const T *x = a.x + base, *dy = a.dy + base, *y = kRelu ? a.relu_output + base : nullptr;
    if (n + 1 < g.N) prefetch_next_backward<kRelu>(g, x, dy, y);
    row_input_gradient<kRelu>(g.HW, k, x, dy, y, a.dx + base);
  }
}

// stream_row (kernels/cpu/stream_store.h) for a row of dx; in the AVX-512 build 16 floats a store, from the first
// 64-byte line on (the same values: each element's arithmetic is the scalar one). Here and not in stream_row: a
// header's templates take the baseline target where they are defined, and GCC refuses AVX-512 intrinsics there.
template <typename T, typename Vector, typename Scalar>
inline void stream_dx_row(int64_t n, T* dst, Vector vector_at, Scalar scalar_at) {
#if defined(EMBER_ISA_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    int64_t i = 0;
    for (; i < n && reinterpret_cast<uintptr_t>(dst + i) % 64 != 0; ++i) dst[i] = scalar_at(i);
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, reinterpret_cast<__m512>(vector_at(i)));
    for (; i < n; ++i) dst[i] = scalar_at(i);
  } else {
    stream_row(n, dst, vector_at, scalar_at);
  }
#else
  stream_row(n, dst, vector_at, scalar_at);
#endif
}

// ---- BatchNorm -> ReLU -> MaxPool2d: each (image, channel) plane goes through a per-thread buffer ----

BatchNormGeometry norm_geometry(const Pool2dGeometry& p) { return {p.N, p.C, p.H * p.W}; }

// The calling thread's scratch of at least `size` values.
template <typename T> T* plane_buffer(int64_t size) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < static_cast<size_t>(size)) buffer.resize(static_cast<size_t>(size));
  return buffer.data();
}

// Channel c normalised and clamped a plane at a time, each plane pooled while it is in the buffer.
template <typename T>
void normalise_pool_channel(const Pool2dGeometry& p, const T* x, int64_t c, Affine<T> f, T* y, int32_t* argmax) {
  const BatchNormGeometry g = norm_geometry(p);
  const int64_t P = p.OH() * p.OW();
  T* plane = plane_buffer<T>(g.HW);
  for (int64_t n = 0; n < g.N; ++n) {
    const T* in = x + (n * g.C + c) * g.HW;
    if (n + 1 < g.N) prefetch_next(g, in);
    affine_row(g.HW, in, f.scale, f.shift, true, plane);
    max_pool2d_plane(p, plane, y + (n * g.C + c) * P, argmax + (n * g.C + c) * P);
  }
}

// Plane (n, c) of the gradient batch_norm_backward reads, masked: the pool's backward with the ReLU's mask. A
// window's winner holds the window's output (relu_output here), so that output > 0 is the mask, and a masked pixel
// gets the +0 the mask gives it.
template <typename T>
void masked_plane(const Pool2dGeometry& p, const BatchNormBackwardArgs<T>& a, const int32_t* argmax, int64_t plane_index,
                  T* plane) {
  const int64_t offset = plane_index * p.OH() * p.OW();
  relu_max_pool2d_plane_backward(p, a.dy + offset, a.relu_output + offset, argmax + offset, plane);
}

// backward_channel with the channel's masked gradient built once, a plane at a time, into the thread's buffer
// (N * H * W: 400 KB for the CNN's first block, within L2) and read from there again for dx: the same sums in the
// same order.
template <typename T>
void pool_backward_channel(const Pool2dGeometry& p, const BatchNormBackwardArgs<T>& a, const int32_t* argmax, int64_t c) {
  const BatchNormGeometry g = norm_geometry(p);
  T* planes = plane_buffer<T>(g.N * g.HW);
  double sum_g = 0, sum_gx = 0;
  for (int64_t n = 0; n < g.N; ++n) {
    const T* x = a.x + (n * g.C + c) * g.HW;
    if (n + 1 < g.N) prefetch_next(g, x);
    T* plane = planes + n * g.HW;
    masked_plane(p, a, argmax, n * g.C + c, plane);
    row_gradient_sums<false>(g.HW, x, plane, static_cast<const T*>(nullptr), a.mean[c], &sum_g, &sum_gx);
  }
  const InputGradient<T> k = channel_gradients(g, a, c, sum_g, sum_gx);
  for (int64_t n = 0; n < g.N; ++n) {
    const int64_t base = (n * g.C + c) * g.HW;
    if (n + 1 < g.N) prefetch_next(g, a.x + base);
    const T *x = a.x + base, *dy = planes + n * g.HW;  // dx streams: the layer before reads it only after the batch
    stream_dx_row(
        g.HW, a.dx + base, [&](auto i) { return k.at(load(dy + i), load(x + i)); },
        [&](int64_t i) { return k.at(dy[i], x[i]); });
  }
  stream_fence();
}

}  // namespace

template <typename T> void batch_norm_forward_train(const BatchNormGeometry& g, const BatchNormTrainArgs<T>& a) {
  EMBER_ISA_DISPATCH(batch_norm_forward_train<T>(g, a));
  detail::check_batch_norm("cpu::batch_norm_forward_train", g, true, static_cast<double>(a.eps));
  parallel_chunks(g.C, kChannelsPerTask, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const Affine<T> f = train_statistics(g, a, c);
      affine_channel(g, a.x, c, f.scale, f.shift, a.relu, a.y);
    }
  });
  if (a.num_batches_tracked != nullptr) ++*a.num_batches_tracked;
}

template <typename T>
void batch_norm_forward_eval(const BatchNormGeometry& g, const T* x, const T* weight, const T* bias,
                             const T* running_mean, const T* running_var, T eps, bool relu, T* y, T* save_invstd) {
  EMBER_ISA_DISPATCH(
      batch_norm_forward_eval<T>(g, x, weight, bias, running_mean, running_var, eps, relu, y, save_invstd));
  detail::check_batch_norm("cpu::batch_norm_forward_eval", g, false, static_cast<double>(eps));
  parallel_chunks(g.C, kChannelsPerTask, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const Affine<T> f = eval_affine(weight, bias, running_mean, running_var, eps, save_invstd, c);
      affine_channel(g, x, c, f.scale, f.shift, relu, y);
    }
  });
}

template <typename T> void batch_norm_backward(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a) {
  EMBER_ISA_DISPATCH(batch_norm_backward<T>(g, a));
  detail::check_batch_norm("cpu::batch_norm_backward", g, a.batch_stats, 1.0);
  parallel_chunks(g.C, kChannelsPerTask, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      if (a.relu_output != nullptr) backward_channel<true>(g, a, c);
      else backward_channel<false>(g, a, c);
    }
  });
}

template <typename T>
void batch_norm_relu_pool_forward_train(const Pool2dGeometry& p, const BatchNormTrainArgs<T>& a, int32_t* argmax) {
  EMBER_ISA_DISPATCH(batch_norm_relu_pool_forward_train<T>(p, a, argmax));
  const char* name = "cpu::batch_norm_relu_pool_forward_train";
  detail::check_batch_norm(name, norm_geometry(p), true, static_cast<double>(a.eps));
  detail::check_pool2d_geometry(name, p);
  parallel_chunks(p.C, kChannelsPerTask, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c)
      normalise_pool_channel(p, a.x, c, train_statistics(norm_geometry(p), a, c), a.y, argmax);
  });
  if (a.num_batches_tracked != nullptr) ++*a.num_batches_tracked;
}

template <typename T>
void batch_norm_relu_pool_forward_eval(const Pool2dGeometry& p, const T* x, const T* weight, const T* bias,
                                       const T* running_mean, const T* running_var, T eps, T* y, int32_t* argmax,
                                       T* save_invstd) {
  EMBER_ISA_DISPATCH(
      batch_norm_relu_pool_forward_eval<T>(p, x, weight, bias, running_mean, running_var, eps, y, argmax, save_invstd));
  const char* name = "cpu::batch_norm_relu_pool_forward_eval";
  detail::check_batch_norm(name, norm_geometry(p), false, static_cast<double>(eps));
  detail::check_pool2d_geometry(name, p);
  parallel_chunks(p.C, kChannelsPerTask, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const Affine<T> f = eval_affine(weight, bias, running_mean, running_var, eps, save_invstd, c);
      normalise_pool_channel(p, x, c, f, y, argmax);
    }
  });
}

template <typename T>
void batch_norm_relu_pool_backward(const Pool2dGeometry& p, const BatchNormBackwardArgs<T>& a, const int32_t* argmax) {
  EMBER_ISA_DISPATCH(batch_norm_relu_pool_backward<T>(p, a, argmax));
  detail::check_batch_norm("cpu::batch_norm_relu_pool_backward", norm_geometry(p), a.batch_stats, 1.0);
  detail::check_pool2d_geometry("cpu::batch_norm_relu_pool_backward", p);
  parallel_chunks(p.C, kChannelsPerTask, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) pool_backward_channel(p, a, argmax, c);
  });
}

#define EMBER_INSTANTIATE_BATCHNORM(T)                                                                        \
  template void batch_norm_forward_train<T>(const BatchNormGeometry&, const BatchNormTrainArgs<T>&);          \
  template void batch_norm_forward_eval<T>(const BatchNormGeometry&, const T*, const T*, const T*, const T*,  \
                                           const T*, T, bool, T*, T*);                                        \
  template void batch_norm_backward<T>(const BatchNormGeometry&, const BatchNormBackwardArgs<T>&);          \
  template void batch_norm_relu_pool_forward_train<T>(const Pool2dGeometry&, const BatchNormTrainArgs<T>&, int32_t*); \
  template void batch_norm_relu_pool_forward_eval<T>(const Pool2dGeometry&, const T*, const T*, const T*,        \
                                                     const T*, const T*, T, T*, int32_t*, T*);                   \
  template void batch_norm_relu_pool_backward<T>(const Pool2dGeometry&, const BatchNormBackwardArgs<T>&,          \
                                                 const int32_t*);
EMBER_INSTANTIATE_BATCHNORM(float)
EMBER_INSTANTIATE_BATCHNORM(double)
#undef EMBER_INSTANTIATE_BATCHNORM

EMBER_ISA_END
}  // namespace cpu
}  // namespace ember::kernels
