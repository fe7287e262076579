// Host batch normalisation: per channel, one pass for the statistics (double sums) and one to write;
// backward: one pass for both sums and one for dx.
#include "kernels/batchnorm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/parallel.h"

namespace ember::kernels {

namespace detail {

void check_batch_norm(const char* name, const BatchNormGeometry& g, bool training, double eps) {
  EMBER_CHECK(g.N >= 0 && g.C > 0 && g.HW > 0, ValueError, name, ": sizes must be positive (N may be 0), got (N, C, H*W) = (",
              g.N, ", ", g.C, ", ", g.HW, ")");
  EMBER_CHECK(!training || g.N * g.HW >= 2, ValueError, name, ": expected more than 1 value per channel when training, got ",
              g.N * g.HW, " (N=", g.N, ", H*W=", g.HW, "); use a batch of at least 2 or eval mode");
  EMBER_CHECK(eps > 0, ValueError, name, ": eps must be positive, got ", eps);
}

}  // namespace detail

namespace cpu {
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

// One SSE2 register of T, as a GCC vector: kLanes accumulators are kLanes / kWidth of them, and lane l of register
// v accumulates what scalar lane v * kWidth + l would, so the sums are those of a 16-lane scalar loop. (GCC left that
// scalar loop unvectorised: the fused ReLU's select and the 32 accumulators kept the gradient sums at 7 GB/s.)
template <typename T> struct Sse;
template <> struct Sse<float> {
  typedef float type __attribute__((vector_size(16)));
};
template <> struct Sse<double> {
  typedef double type __attribute__((vector_size(16)));
};
template <typename T> using Vec = typename Sse<T>::type;
template <typename T> constexpr int kWidth = 16 / sizeof(T);
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

// Over one channel: sum(g) and sum(g * (x - mean)) for g = dy, masked by relu_output > 0 when kRelu.
template <bool kRelu, typename T>
void gradient_sums(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a, int64_t c, double* sg, double* sgx) {
  const T mean = a.mean[c];
  double total_g = 0, total_gx = 0;
  for (int64_t n = 0; n < g.N; ++n) {
    const int64_t base = (n * g.C + c) * g.HW;
    const T *x = a.x + base, *dy = a.dy + base, *y = kRelu ? a.relu_output + base : nullptr;
    if (n + 1 < g.N) prefetch_next_backward<kRelu>(g, x, dy, y);
    for (int64_t start = 0; start < g.HW; start += kBlock) {
      const int64_t end = std::min(g.HW, start + kBlock);
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
      flush<T>(p, &total_g);
      flush<T>(q, &total_gx);
    }
  }
  *sg = total_g;
  *sgx = total_gx * static_cast<double>(a.invstd[c]);
}

// dx = scale * (g - mean_g - (x - mean) * invstd * mean_gx) over one channel.
template <bool kRelu, typename T>
void input_gradient(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a, int64_t c, T scale, T mean_g,
                    T mean_gx) {
  const T mean = a.mean[c], invstd = a.invstd[c];
  for (int64_t n = 0; n < g.N; ++n) {
    const int64_t base = (n * g.C + c) * g.HW;
    const T *x = a.x + base, *dy = a.dy + base, *y = kRelu ? a.relu_output + base : nullptr;
    T* dx = a.dx + base;
    if (n + 1 < g.N) prefetch_next_backward<kRelu>(g, x, dy, y);
    for (int64_t i = 0; i < g.HW; ++i) {
      const T gi = masked<kRelu>(dy, y, i);
      dx[i] = scale * (gi - mean_g - (x[i] - mean) * invstd * mean_gx);
    }
  }
}

// y = x * scale + shift over one channel, then ReLU when asked.
template <typename T> void affine_channel(const BatchNormGeometry& g, const T* x, int64_t c, T scale, T shift, bool relu,
                                          T* y) {
  for (int64_t n = 0; n < g.N; ++n) {
    const T* in = x + (n * g.C + c) * g.HW;
    T* out = y + (n * g.C + c) * g.HW;
    if (n + 1 < g.N) prefetch_next(g, in);
    if (relu) {
      for (int64_t i = 0; i < g.HW; ++i) {
        const T v = in[i] * scale + shift;
        out[i] = v < T(0) ? T(0) : v;
      }
    } else {
      for (int64_t i = 0; i < g.HW; ++i) out[i] = in[i] * scale + shift;
    }
  }
}

// Statistics, running statistics and output of channel c in training mode.
template <typename T> void train_channel(const BatchNormGeometry& g, const BatchNormTrainArgs<T>& a, int64_t c) {
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
  const double w = a.weight != nullptr ? static_cast<double>(a.weight[c]) : 1.0;
  const double b = a.bias != nullptr ? static_cast<double>(a.bias[c]) : 0.0;
  affine_channel(g, a.x, c, static_cast<T>(w * invstd), static_cast<T>(b - mean * w * invstd), a.relu, a.y);
}

// Both gradient sums of channel c, the parameter gradients, then dx.
template <typename T> void backward_channel(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a, int64_t c) {
  const double M = static_cast<double>(g.N * g.HW);
  const bool relu = a.relu_output != nullptr;
  double sum_g = 0, sum_gx = 0;  // sum(g), sum(g * xhat): g is dy under the ReLU mask
  if (relu) gradient_sums<true>(g, a, c, &sum_g, &sum_gx);
  else gradient_sums<false>(g, a, c, &sum_g, &sum_gx);
  if (a.dweight != nullptr) a.dweight[c] += static_cast<T>(sum_gx);
  if (a.dbias != nullptr) a.dbias[c] += static_cast<T>(sum_g);
  const T scale = (a.weight != nullptr ? a.weight[c] : T(1)) * a.invstd[c];
  // With batch statistics the mean and variance move with x: dx = scale * (g - mean(g) - xhat * mean(g xhat)).
  const T mean_g = a.batch_stats ? static_cast<T>(sum_g / M) : T(0);
  const T mean_gx = a.batch_stats ? static_cast<T>(sum_gx / M) : T(0);
  if (relu) input_gradient<true>(g, a, c, scale, mean_g, mean_gx);
  else input_gradient<false>(g, a, c, scale, mean_g, mean_gx);
}

}  // namespace

template <typename T> void batch_norm_forward_train(const BatchNormGeometry& g, const BatchNormTrainArgs<T>& a) {
  detail::check_batch_norm("cpu::batch_norm_forward_train", g, true, static_cast<double>(a.eps));
  parallel_chunks(g.C, kChannelsPerTask, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) train_channel(g, a, c);
  });
  if (a.num_batches_tracked != nullptr) ++*a.num_batches_tracked;
}

template <typename T>
void batch_norm_forward_eval(const BatchNormGeometry& g, const T* x, const T* weight, const T* bias,
                             const T* running_mean, const T* running_var, T eps, bool relu, T* y, T* save_invstd) {
  detail::check_batch_norm("cpu::batch_norm_forward_eval", g, false, static_cast<double>(eps));
  parallel_chunks(g.C, kChannelsPerTask, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + static_cast<double>(eps));
      const double w = weight != nullptr ? static_cast<double>(weight[c]) : 1.0;
      const double b = bias != nullptr ? static_cast<double>(bias[c]) : 0.0;
      const double mean = static_cast<double>(running_mean[c]);
      if (save_invstd != nullptr) save_invstd[c] = static_cast<T>(invstd);
      affine_channel(g, x, c, static_cast<T>(w * invstd), static_cast<T>(b - mean * w * invstd), relu, y);
    }
  });
}

template <typename T> void batch_norm_backward(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a) {
  detail::check_batch_norm("cpu::batch_norm_backward", g, a.batch_stats, 1.0);
  parallel_chunks(g.C, kChannelsPerTask, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) backward_channel(g, a, c);
  });
}

#define EMBER_INSTANTIATE_BATCHNORM(T)                                                                        \
  template void batch_norm_forward_train<T>(const BatchNormGeometry&, const BatchNormTrainArgs<T>&);          \
  template void batch_norm_forward_eval<T>(const BatchNormGeometry&, const T*, const T*, const T*, const T*,  \
                                           const T*, T, bool, T*, T*);                                        \
  template void batch_norm_backward<T>(const BatchNormGeometry&, const BatchNormBackwardArgs<T>&);
EMBER_INSTANTIATE_BATCHNORM(float)
EMBER_INSTANTIATE_BATCHNORM(double)
#undef EMBER_INSTANTIATE_BATCHNORM

}  // namespace cpu
}  // namespace ember::kernels
