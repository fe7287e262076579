// Host batch normalisation: per channel, one pass for the statistics (double sums) and one to write;
// backward: one pass for both sums and one for dx.
#include "kernels/batchnorm.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

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

constexpr int kLanes = 8;  // independent accumulators, so the double sums vectorise without reassociation

// Sums of x and x^2 over one channel in double: a float channel's one-pass variance E[x^2] - E[x]^2
// then keeps ~8 digits even when the mean is 10^4 standard deviations from zero.
template <typename T> void channel_sums(const BatchNormGeometry& g, const T* x, int64_t c, double* s1, double* s2) {
  double a[kLanes] = {}, b[kLanes] = {};
  double tail1 = 0, tail2 = 0;
  for (int64_t n = 0; n < g.N; ++n) {
    const T* row = x + (n * g.C + c) * g.HW;
    int64_t i = 0;
    for (; i + kLanes <= g.HW; i += kLanes)
      for (int j = 0; j < kLanes; ++j) {
        const double d = static_cast<double>(row[i + j]);
        a[j] += d;
        b[j] += d * d;
      }
    for (; i < g.HW; ++i) {
      const double d = static_cast<double>(row[i]);
      tail1 += d;
      tail2 += d * d;
    }
  }
  for (int j = 0; j < kLanes; ++j) {
    tail1 += a[j];
    tail2 += b[j];
  }
  *s1 = tail1;
  *s2 = tail2;
}

// y = x * scale + shift over one channel, then ReLU when asked.
template <typename T> void affine_channel(const BatchNormGeometry& g, const T* x, int64_t c, T scale, T shift, bool relu,
                                          T* y) {
  for (int64_t n = 0; n < g.N; ++n) {
    const T* in = x + (n * g.C + c) * g.HW;
    T* out = y + (n * g.C + c) * g.HW;
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

}  // namespace

template <typename T> void batch_norm_forward_train(const BatchNormGeometry& g, const BatchNormTrainArgs<T>& a) {
  detail::check_batch_norm("cpu::batch_norm_forward_train", g, true, static_cast<double>(a.eps));
  const double M = static_cast<double>(g.N * g.HW);
  for (int64_t c = 0; c < g.C; ++c) {
    double s1 = 0, s2 = 0;
    channel_sums(g, a.x, c, &s1, &s2);
    const double mean = s1 / M;
    const double var = std::max(0.0, s2 / M - mean * mean);  // biased: what the batch is normalised with
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
  if (a.num_batches_tracked != nullptr) ++*a.num_batches_tracked;
}

template <typename T>
void batch_norm_forward_eval(const BatchNormGeometry& g, const T* x, const T* weight, const T* bias,
                             const T* running_mean, const T* running_var, T eps, bool relu, T* y, T* save_invstd) {
  detail::check_batch_norm("cpu::batch_norm_forward_eval", g, false, static_cast<double>(eps));
  for (int64_t c = 0; c < g.C; ++c) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + static_cast<double>(eps));
    const double w = weight != nullptr ? static_cast<double>(weight[c]) : 1.0;
    const double b = bias != nullptr ? static_cast<double>(bias[c]) : 0.0;
    const double mean = static_cast<double>(running_mean[c]);
    if (save_invstd != nullptr) save_invstd[c] = static_cast<T>(invstd);
    affine_channel(g, x, c, static_cast<T>(w * invstd), static_cast<T>(b - mean * w * invstd), relu, y);
  }
}

template <typename T> void batch_norm_backward(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a) {
  detail::check_batch_norm("cpu::batch_norm_backward", g, a.batch_stats, 1.0);
  const double M = static_cast<double>(g.N * g.HW);
  for (int64_t c = 0; c < g.C; ++c) {
    const T mean = a.mean[c], invstd = a.invstd[c];
    double sum_g = 0, sum_gx = 0;  // sum(dy), sum(dy * xhat) with the ReLU mask applied to dy
    for (int64_t n = 0; n < g.N; ++n) {
      const int64_t base = (n * g.C + c) * g.HW;
      for (int64_t i = 0; i < g.HW; ++i) {
        const T gi = a.relu_output == nullptr || a.relu_output[base + i] > T(0) ? a.dy[base + i] : T(0);
        sum_g += static_cast<double>(gi);
        sum_gx += static_cast<double>(gi) * static_cast<double>((a.x[base + i] - mean) * invstd);
      }
    }
    if (a.dweight != nullptr) a.dweight[c] += static_cast<T>(sum_gx);
    if (a.dbias != nullptr) a.dbias[c] += static_cast<T>(sum_g);
    const T scale = (a.weight != nullptr ? a.weight[c] : T(1)) * invstd;
    // With batch statistics the mean and variance move with x: dx = scale * (g - mean(g) - xhat * mean(g xhat)).
    const T mean_g = a.batch_stats ? static_cast<T>(sum_g / M) : T(0);
    const T mean_gx = a.batch_stats ? static_cast<T>(sum_gx / M) : T(0);
    for (int64_t n = 0; n < g.N; ++n) {
      const int64_t base = (n * g.C + c) * g.HW;
      for (int64_t i = 0; i < g.HW; ++i) {
        const T gi = a.relu_output == nullptr || a.relu_output[base + i] > T(0) ? a.dy[base + i] : T(0);
        const T xhat = (a.x[base + i] - mean) * invstd;
        a.dx[base + i] = scale * (gi - mean_g - xhat * mean_gx);
      }
    }
  }
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
