// Plain references for the CNN kernels, straight from the definitions in float64: the direct 7-loop
// convolution and its two gradients, max pooling, batch normalisation. Slow on purpose; tests only.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/batchnorm.h"
#include "kernels/conv.h"
#include "kernels/pool.h"

namespace ember::test {

// Calls f(n, o, c, oh, ow, kh, kw, ih, iw) for every product term y[n, o, oh, ow] += w[o, c, kh, kw] * x[n, c, ih, iw].
template <typename F> void for_each_conv_term(const kernels::Conv2dGeometry& g, F&& f) {
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.OC; ++o)
      for (int64_t oh = 0; oh < g.OH(); ++oh)
        for (int64_t ow = 0; ow < g.OW(); ++ow)
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t kh = 0; kh < g.KH; ++kh)
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t ih = oh * g.stride_h - g.pad_h + kh, iw = ow * g.stride_w - g.pad_w + kw;
                if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) f(n, o, c, oh, ow, kh, kw, ih, iw);
              }
}

struct ConvIndex {
  const kernels::Conv2dGeometry& g;
  int64_t x(int64_t n, int64_t c, int64_t h, int64_t w) const { return ((n * g.C + c) * g.H + h) * g.W + w; }
  int64_t w(int64_t o, int64_t c, int64_t kh, int64_t kw) const { return ((o * g.C + c) * g.KH + kh) * g.KW + kw; }
  int64_t y(int64_t n, int64_t o, int64_t oh, int64_t ow) const { return ((n * g.OC + o) * g.OH() + oh) * g.OW() + ow; }
};

inline std::vector<double> conv2d_reference(const kernels::Conv2dGeometry& g, const std::vector<double>& x,
                                            const std::vector<double>& w, const std::vector<double>* bias) {
  ConvIndex at{g};
  std::vector<double> y(static_cast<size_t>(g.N * g.OC * g.OH() * g.OW()), 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.OC; ++o)
      for (int64_t p = 0; p < g.OH() * g.OW(); ++p) y[at.y(n, o, 0, 0) + p] = bias ? (*bias)[o] : 0.0;
  for_each_conv_term(g, [&](int64_t n, int64_t o, int64_t c, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih,
                            int64_t iw) { y[at.y(n, o, oh, ow)] += w[at.w(o, c, kh, kw)] * x[at.x(n, c, ih, iw)]; });
  return y;
}

inline std::vector<double> conv2d_input_grad_reference(const kernels::Conv2dGeometry& g, const std::vector<double>& dy,
                                                       const std::vector<double>& w) {
  ConvIndex at{g};
  std::vector<double> dx(static_cast<size_t>(g.N * g.C * g.H * g.W), 0.0);
  for_each_conv_term(g, [&](int64_t n, int64_t o, int64_t c, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih,
                            int64_t iw) { dx[at.x(n, c, ih, iw)] += w[at.w(o, c, kh, kw)] * dy[at.y(n, o, oh, ow)]; });
  return dx;
}

// The weight gradient; the bias gradient (sum of dy per output channel) goes to *dbias.
inline std::vector<double> conv2d_weight_grad_reference(const kernels::Conv2dGeometry& g, const std::vector<double>& x,
                                                        const std::vector<double>& dy, std::vector<double>* dbias) {
  ConvIndex at{g};
  std::vector<double> dw(static_cast<size_t>(g.OC * g.CKK()), 0.0);
  for_each_conv_term(g, [&](int64_t n, int64_t o, int64_t c, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih,
                            int64_t iw) { dw[at.w(o, c, kh, kw)] += x[at.x(n, c, ih, iw)] * dy[at.y(n, o, oh, ow)]; });
  dbias->assign(static_cast<size_t>(g.OC), 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.OC; ++o)
      for (int64_t p = 0; p < g.OH() * g.OW(); ++p) (*dbias)[o] += dy[at.y(n, o, 0, 0) + p];
  return dw;
}

struct PoolReference {
  std::vector<double> y;
  std::vector<int32_t> argmax;
};

// Max over each window of real pixels (padding never wins); the first maximum wins ties.
inline PoolReference max_pool2d_reference(const kernels::Pool2dGeometry& g, const std::vector<double>& x) {
  PoolReference r;
  for (int64_t plane = 0; plane < g.N * g.C; ++plane)
    for (int64_t oh = 0; oh < g.OH(); ++oh)
      for (int64_t ow = 0; ow < g.OW(); ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        int32_t where = -1;
        for (int64_t kh = 0; kh < g.KH; ++kh)
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const int64_t ih = oh * g.stride_h - g.pad_h + kh, iw = ow * g.stride_w - g.pad_w + kw;
            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
            const double v = x[plane * g.H * g.W + ih * g.W + iw];
            if (where < 0 || v > best) {
              best = v;
              where = static_cast<int32_t>(ih * g.W + iw);
            }
          }
        r.y.push_back(best);
        r.argmax.push_back(where);
      }
  return r;
}

struct BatchNormReference {
  std::vector<double> y, mean, invstd, running_mean, running_var;
};

// Training mode from the definition: two-pass mean and biased variance per channel, running statistics
// moved towards the mean and the unbiased variance.
inline BatchNormReference batch_norm_train_reference(const kernels::BatchNormGeometry& g, const std::vector<double>& x,
                                                     const std::vector<double>& w, const std::vector<double>& b,
                                                     std::vector<double> running_mean, std::vector<double> running_var,
                                                     double momentum, double eps, bool relu) {
  BatchNormReference r;
  r.y.assign(x.size(), 0.0);
  const double M = static_cast<double>(g.N * g.HW);
  for (int64_t c = 0; c < g.C; ++c) {
    double mean = 0, var = 0;
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t i = 0; i < g.HW; ++i) mean += x[(n * g.C + c) * g.HW + i] / M;
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t i = 0; i < g.HW; ++i) var += std::pow(x[(n * g.C + c) * g.HW + i] - mean, 2) / M;
    const double invstd = 1 / std::sqrt(var + eps);
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t i = 0; i < g.HW; ++i) {
        const int64_t k = (n * g.C + c) * g.HW + i;
        const double v = (x[k] - mean) * invstd * w[c] + b[c];
        r.y[k] = relu && v < 0 ? 0 : v;
      }
    r.mean.push_back(mean);
    r.invstd.push_back(invstd);
    running_mean[c] = (1 - momentum) * running_mean[c] + momentum * mean;
    running_var[c] = (1 - momentum) * running_var[c] + momentum * var * M / (M - 1);
  }
  r.running_mean = running_mean;
  r.running_var = running_var;
  return r;
}

}  // namespace ember::test
