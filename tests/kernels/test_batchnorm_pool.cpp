// The host BatchNorm -> ReLU -> MaxPool2d kernel against the three kernels one after the other: the same bits in
// training and eval mode, forward (pooled output, argmax, statistics) and backward (dx and the parameter
// gradients), at 1 and 2 threads, for the CNN's windows, odd sizes, overlapping windows and planes of over 1024
// pixels (the sums' blocks); and its argument rules.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/batchnorm.h"
#include "kernels/pool.h"
#include "support/data.h"
#include "support/isa.h"
#include "support/threads.h"

using namespace ember;
using kernels::BatchNormGeometry;
using kernels::Pool2dGeometry;

namespace {

// {N, C, H, W, KH, KW, stride_h, stride_w, pad_h, pad_w}
const std::vector<Pool2dGeometry> kShapes = {
    {4, 3, 8, 8, 2, 2, 2, 2, 0, 0},   {3, 2, 7, 5, 2, 2, 2, 2, 0, 0},   {2, 3, 9, 9, 3, 3, 2, 2, 1, 1},
    {6, 4, 28, 28, 2, 2, 2, 2, 0, 0}, {9, 8, 14, 14, 2, 2, 2, 2, 0, 0}, {2, 2, 40, 36, 2, 2, 2, 2, 0, 0},
    {2, 3, 9, 11, 2, 2, 2, 2, 0, 0},  // rows of 5 windows (the vector path) with a row and a column past them
};

template <typename T> bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <typename T> std::vector<T> values(int64_t n, unsigned seed, double lo, double hi) {
  const std::vector<double> v = test::random_values<double>(n, seed, lo, hi);
  return std::vector<T>(v.begin(), v.end());
}

// What both paths produce; `unfused` runs batch_norm (with ReLU) then max_pool2d, and back.
template <typename T> struct Results {
  std::vector<T> y, mean, invstd, running_mean, running_var, dx, dweight, dbias;
  std::vector<int32_t> argmax;
  int64_t tracked = 7;
};

template <typename T> Results<T> run(const Pool2dGeometry& p, bool training, bool fused) {
  const BatchNormGeometry g{p.N, p.C, p.H * p.W};
  const int64_t P = p.N * p.C * p.OH() * p.OW();
  const std::vector<T> x = values<T>(g.N * g.C * g.HW, 3, -2, 3), w = values<T>(g.C, 4, 0.5, 1.5),
                       b = values<T>(g.C, 5, -0.5, 0.5), dy = values<T>(P, 6, -1, 1);
  Results<T> r;
  r.running_mean = values<T>(g.C, 7, -0.2, 0.2);
  r.running_var = values<T>(g.C, 8, 0.5, 2);
  r.mean = training ? std::vector<T>(g.C) : r.running_mean;
  r.invstd.resize(g.C);
  r.y.resize(P);
  r.argmax.resize(P);
  std::vector<T> relu_out(x.size());  // the unfused path's full-size output
  const kernels::BatchNormTrainArgs<T> train{x.data(),           w.data(),           b.data(),
                                             fused ? r.y.data() : relu_out.data(),
                                             r.mean.data(),      r.invstd.data(),    r.running_mean.data(),
                                             r.running_var.data(), &r.tracked,       T(0.1),
                                             T(1e-5),            true};
  if (fused && training) kernels::cpu::batch_norm_relu_pool_forward_train<T>(p, train, r.argmax.data());
  if (fused && !training)
    kernels::cpu::batch_norm_relu_pool_forward_eval<T>(p, x.data(), w.data(), b.data(), r.running_mean.data(),
                                                       r.running_var.data(), T(1e-5), r.y.data(), r.argmax.data(),
                                                       r.invstd.data());
  if (!fused) {
    if (training) kernels::cpu::batch_norm_forward_train<T>(g, train);
    else
      kernels::cpu::batch_norm_forward_eval<T>(g, x.data(), w.data(), b.data(), r.running_mean.data(),
                                               r.running_var.data(), T(1e-5), true, relu_out.data(), r.invstd.data());
    kernels::cpu::max_pool2d_forward<T>(p, relu_out.data(), r.y.data(), r.argmax.data());
  }
  r.dx.resize(x.size());
  r.dweight = values<T>(g.C, 9, -1, 1);  // gradients accumulate
  r.dbias = values<T>(g.C, 10, -1, 1);
  std::vector<T> dy_full(x.size());
  if (!fused) kernels::cpu::max_pool2d_backward<T>(p, dy.data(), r.argmax.data(), dy_full.data());
  const kernels::BatchNormBackwardArgs<T> back{x.data(),        fused ? dy.data() : dy_full.data(),
                                               w.data(),        r.mean.data(),
                                               r.invstd.data(), fused ? r.y.data() : relu_out.data(),
                                               r.dx.data(),     r.dweight.data(),
                                               r.dbias.data(),  training};
  if (fused) kernels::cpu::batch_norm_relu_pool_backward<T>(p, back, r.argmax.data());
  else kernels::cpu::batch_norm_backward<T>(g, back);
  return r;
}

// Every output of `got` has `want`'s bits.
template <typename T> void check_same_results(const Results<T>& got, const Results<T>& want) {
  CHECK(same_bits(got.y, want.y));
  CHECK(got.argmax == want.argmax);
  CHECK(same_bits(got.mean, want.mean));
  CHECK(same_bits(got.invstd, want.invstd));
  CHECK(same_bits(got.running_mean, want.running_mean));
  CHECK(same_bits(got.running_var, want.running_var));
  CHECK(got.tracked == want.tracked);
  CHECK(same_bits(got.dx, want.dx));
  CHECK(same_bits(got.dweight, want.dweight));
  CHECK(same_bits(got.dbias, want.dbias));
}

template <typename T> void check_same(const Pool2dGeometry& p, bool training, int threads) {
  INFO("x (" << p.N << "," << p.C << "," << p.H << "," << p.W << ") window " << p.KH << "x" << p.KW << " stride "
             << p.stride_h << " pad " << p.pad_h << " training " << training << " threads " << threads
             << " bytes " << sizeof(T));
  test::ThreadsScope scope(threads);
  check_same_results(run<T>(p, training, true), run<T>(p, training, false));
}

template <typename T> void check_isa(const Pool2dGeometry& p, bool training, bool fused) {
  using kernels::cpu::HostIsa;
  INFO("x (" << p.N << "," << p.C << "," << p.H << "," << p.W << ") window " << p.KH << "x" << p.KW << " stride "
             << p.stride_h << " training " << training << " fused " << fused << " bytes " << sizeof(T));
  Results<T> want, got;
  {
    test::IsaScope scope(HostIsa::baseline);
    REQUIRE(kernels::cpu::host_isa() == HostIsa::baseline);
    want = run<T>(p, training, fused);
  }
  {
    test::IsaScope scope(HostIsa::avx512);
    REQUIRE(kernels::cpu::host_isa() == HostIsa::avx512);
    got = run<T>(p, training, fused);
  }
  check_same_results(got, want);
}

}  // namespace

TEST_CASE("cpu batch_norm and max_pool2d: the AVX-512 build gives the baseline build's bits", "[kernels]") {
  if (!kernels::cpu::host_isa_available(kernels::cpu::HostIsa::avx512)) {
    WARN("this CPU or build has no AVX-512: only the baseline build runs here");
    return;
  }
  for (const Pool2dGeometry& p : kShapes)
    for (bool training : {true, false})
      for (bool fused : {true, false}) {
        check_isa<float>(p, training, fused);
        check_isa<double>(p, training, fused);
      }
}

TEST_CASE("cpu batch_norm_relu_pool: the bits of batch_norm with ReLU then max_pool2d, both ways, both modes",
          "[kernels]") {
  for (const Pool2dGeometry& p : kShapes)
    for (bool training : {true, false})
      for (int threads : {1, 2}) {
        check_same<float>(p, training, threads);
        check_same<double>(p, training, threads);
      }
}

TEST_CASE("cpu batch_norm_relu_pool: one value per channel cannot train, and windows must fit", "[kernels]") {
  std::vector<float> buf(64, 1.0f), stats(4, 1.0f);
  std::vector<int32_t> idx(64);
  const kernels::BatchNormTrainArgs<float> a{buf.data(), nullptr, nullptr, buf.data(), stats.data(), stats.data(),
                                             nullptr,    nullptr, nullptr, 0.1f,       1e-5f,        true};
  CHECK_THROWS_WITH(kernels::cpu::batch_norm_relu_pool_forward_train<float>({1, 2, 1, 1, 1, 1, 1, 1, 0, 0}, a, idx.data()),
                    Catch::Contains("expected more than 1 value per channel when training"));
  CHECK_THROWS_WITH(kernels::cpu::batch_norm_relu_pool_forward_train<float>({2, 2, 3, 3, 5, 5, 1, 1, 0, 0}, a, idx.data()),
                    Catch::Contains("window does not fit"));
}
