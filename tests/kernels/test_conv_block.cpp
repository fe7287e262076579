// The host Conv2d -> BatchNorm -> ReLU -> MaxPool2d kernels, which compute the convolution's planes where they need
// them, against the same planes stored and fed to the fused BatchNorm -> ReLU -> MaxPool2d kernels: the same
// bits (pooled output, argmax, statistics, the gradient w.r.t. the convolution's output, the parameter gradients)
// in training and eval mode, at 1 and 2 threads, on the vector path (the CNN's first layer, RGB, no padding, a 5x1
// filter, no bias) and the scalar one (stride 2, more taps than the vector path takes); the planes against
// conv2d_forward (its bits where the probe says OpenBLAS sums alike); and the argument rules.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/batchnorm.h"
#include "kernels/conv.h"
#include "kernels/cpu/conv_plane.h"
#include "support/data.h"
#include "support/threads.h"

using namespace ember;
using kernels::Conv2dGeometry;
using kernels::Pool2dGeometry;

namespace {

struct Case {
  Conv2dGeometry g;  // {N, C, H, W, OC, KH, KW, stride_h, stride_w, pad_h, pad_w}
  bool bias;
};
const std::vector<Case> kCases = {
    {{6, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1}, true},  {{3, 3, 9, 11, 5, 3, 3, 1, 1, 1, 1}, true},
    {{2, 1, 10, 10, 3, 3, 3, 1, 1, 0, 0}, true},  {{3, 2, 12, 9, 2, 5, 1, 1, 1, 2, 0}, false},
    {{2, 1, 40, 36, 2, 3, 3, 1, 1, 1, 1}, true},  // planes of over 1024 pixels (the statistics' blocks)
    {{3, 1, 13, 13, 3, 3, 3, 2, 2, 1, 1}, true},  // stride 2: the scalar path
    {{2, 4, 8, 8, 3, 3, 3, 1, 1, 1, 1}, true},    // 36 taps: the scalar path
};

Pool2dGeometry pool_over(const Conv2dGeometry& g) { return {g.N, g.OC, g.OH(), g.OW(), 2, 2, 2, 2, 0, 0}; }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> values(int64_t n, unsigned seed, double lo, double hi) {
  const std::vector<double> v = test::random_values<double>(n, seed, lo, hi);
  return std::vector<float>(v.begin(), v.end());
}

// z = every plane of the convolution, by cpu::conv_plane.
void conv_planes(const kernels::ConvPlanes& conv, float* z) {
  const Conv2dGeometry& g = conv.g;
  std::vector<float> padded(static_cast<size_t>(g.N * g.C * (g.H + 2 * g.pad_h) * (g.W + 2 * g.pad_w)));
  kernels::cpu::pad_images(g, conv.x, padded.data());
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t oc = 0; oc < g.OC; ++oc)
      kernels::cpu::conv_plane(g, padded.data(), conv.weight, conv.bias, n, oc, z + (n * g.OC + oc) * g.OH() * g.OW());
}

struct Results {
  std::vector<float> y, mean, invstd, running_mean, running_var, dz, dweight, dbias;
  std::vector<int32_t> argmax;
  int64_t tracked = 3;
};

// fused: the block's kernels; else conv_planes into z, then the BatchNorm -> ReLU -> MaxPool2d kernels on z.
Results run(const Case& k, bool training, bool fused) {
  const Conv2dGeometry& g = k.g;
  const Pool2dGeometry p = pool_over(g);
  const int64_t Z = g.N * g.OC * g.OH() * g.OW(), P = p.N * p.C * p.OH() * p.OW();
  const std::vector<float> x = values(g.N * g.C * g.H * g.W, 11, -1, 1), cw = values(g.OC * g.CKK(), 12, -0.5, 0.5),
                           cb = values(g.OC, 13, -0.3, 0.3), w = values(g.OC, 14, 0.5, 1.5),
                           b = values(g.OC, 15, -0.5, 0.5), dy = values(P, 16, -1, 1);
  const kernels::ConvPlanes conv{g, x.data(), cw.data(), k.bias ? cb.data() : nullptr};
  Results r;
  r.running_mean = values(g.OC, 17, -0.2, 0.2);
  r.running_var = values(g.OC, 18, 0.5, 2);
  r.mean = training ? std::vector<float>(g.OC) : r.running_mean;
  r.invstd.resize(g.OC);
  r.y.resize(P);
  r.argmax.resize(P);
  std::vector<float> z(fused ? 0 : Z);
  if (!fused) conv_planes(conv, z.data());
  const kernels::BatchNormTrainArgs<float> a{z.data(),      w.data(),      b.data(),   r.y.data(),
                                             r.mean.data(), r.invstd.data(), r.running_mean.data(),
                                             r.running_var.data(), &r.tracked, 0.1f,  1e-5f, true};
  if (fused && training) kernels::cpu::conv_batch_norm_relu_pool_forward_train(conv, p, a, r.argmax.data());
  if (fused && !training)
    kernels::cpu::conv_batch_norm_relu_pool_forward_eval(conv, p, w.data(), b.data(), r.running_mean.data(),
                                                         r.running_var.data(), 1e-5f, r.y.data(), r.argmax.data(),
                                                         r.invstd.data());
  if (!fused && training) kernels::cpu::batch_norm_relu_pool_forward_train<float>(p, a, r.argmax.data());
  if (!fused && !training)
    kernels::cpu::batch_norm_relu_pool_forward_eval<float>(p, z.data(), w.data(), b.data(), r.running_mean.data(),
                                                           r.running_var.data(), 1e-5f, r.y.data(), r.argmax.data(),
                                                           r.invstd.data());
  r.dz.resize(Z);
  r.dweight = values(g.OC, 19, -1, 1);  // gradients accumulate
  r.dbias = values(g.OC, 20, -1, 1);
  const kernels::BatchNormBackwardArgs<float> back{z.data(),        dy.data(),   w.data(),         r.mean.data(),
                                                   r.invstd.data(), r.y.data(), r.dz.data(),       r.dweight.data(),
                                                   r.dbias.data(),  training};
  if (fused) kernels::cpu::conv_batch_norm_relu_pool_backward(conv, p, back, r.argmax.data());
  else kernels::cpu::batch_norm_relu_pool_backward<float>(p, back, r.argmax.data());
  return r;
}

}  // namespace

TEST_CASE("cpu conv_batch_norm_relu_pool: the bits of its planes fed to batch_norm_relu_pool, both ways",
          "[kernels]") {
  for (const Case& k : kCases)
    for (bool training : {true, false})
      for (int threads : {1, 2}) {
        const Conv2dGeometry& g = k.g;
        INFO("x (" << g.N << "," << g.C << "," << g.H << "," << g.W << ") filters " << g.OC << "x" << g.KH << "x" << g.KW
                   << " stride " << g.stride_h << " pad " << g.pad_h << " bias " << k.bias << " training " << training
                   << " threads " << threads << " recomputes " << kernels::cpu::conv_block_recomputes(g));
        test::ThreadsScope scope(threads);
        const Results want = run(k, training, false), got = run(k, training, true);
        CHECK(same_bits(got.y, want.y));
        CHECK(got.argmax == want.argmax);
        CHECK(same_bits(got.mean, want.mean));
        CHECK(same_bits(got.invstd, want.invstd));
        CHECK(same_bits(got.running_mean, want.running_mean));
        CHECK(same_bits(got.running_var, want.running_var));
        CHECK(got.tracked == want.tracked);
        CHECK(same_bits(got.dz, want.dz));
        CHECK(same_bits(got.dweight, want.dweight));
        CHECK(same_bits(got.dbias, want.dbias));
      }
}

TEST_CASE("cpu conv_batch_norm_relu_pool: the pool must read the convolution's output", "[kernels]") {
  const Conv2dGeometry g{2, 1, 8, 8, 3, 3, 3, 1, 1, 1, 1};
  std::vector<float> buf(512, 1.0f);
  std::vector<int32_t> idx(512);
  const kernels::ConvPlanes conv{g, buf.data(), buf.data(), nullptr};
  const kernels::BatchNormTrainArgs<float> a{nullptr,    nullptr, nullptr, buf.data(), buf.data(), buf.data(),
                                             nullptr,    nullptr, nullptr, 0.1f,       1e-5f,      true};
  CHECK_THROWS_WITH(kernels::cpu::conv_batch_norm_relu_pool_forward_train(conv, {2, 4, 8, 8, 2, 2, 2, 2, 0, 0}, a,
                                                                          idx.data()),
                    Catch::Contains("must be the convolution's output (2, 3, 8, 8)"));
}

TEST_CASE("cpu conv_plane: the CNN's first layer takes the vector path on an AVX-512 CPU", "[kernels]") {
  const Conv2dGeometry g{128, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1};
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f")) return;  // the scalar path: the bits test above covers it
#endif
  CHECK(kernels::cpu::conv_plane_vectorised(g));
  CHECK_FALSE(kernels::cpu::conv_plane_vectorised({128, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1}));  // 288 taps
  CHECK_FALSE(kernels::cpu::conv_block_recomputes({128, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1}));
}

TEST_CASE("cpu conv_plane: conv2d_forward's values, and its bits where conv_plane_matches_gemm", "[kernels]") {
  for (const Case& k : kCases) {
    const Conv2dGeometry& g = k.g;
    const std::vector<float> x = values(g.N * g.C * g.H * g.W, 21, -1, 1), w = values(g.OC * g.CKK(), 22, -0.5, 0.5),
                             b = values(g.OC, 23, -0.3, 0.3);
    const kernels::ConvPlanes conv{g, x.data(), w.data(), k.bias ? b.data() : nullptr};
    std::vector<float> want(static_cast<size_t>(g.N * g.OC * g.OH() * g.OW())), got(want.size());
    kernels::cpu::conv2d_forward<float>(g, conv.x, conv.weight, conv.bias, want.data());
    conv_planes(conv, got.data());
    const bool same = kernels::cpu::conv_plane_matches_gemm(g);
    INFO("x (" << g.N << "," << g.C << "," << g.H << "," << g.W << ") filters " << g.OC << "x" << g.KH << "x" << g.KW
               << " stride " << g.stride_h << " OpenBLAS sums alike: " << same);
    for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(1e-6));
    if (same) CHECK(same_bits(got, want));
  }
}
