// Host conv2d kernels against the direct float64 definition (forward, input and weight gradients, bias
// null or not, gradients accumulated, both gradients in one pass), finite-difference gradient checks, and the
// argument rules.
#include <catch2/catch.hpp>

#include <cmath>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/conv.h"
#include "kernels/cpu/conv_packed.h"
#include "support/cnn_reference.h"
#include "support/data.h"
#include "support/gradcheck.h"
#include "support/isa.h"
#include "support/threads.h"

using namespace ember;
using kernels::Conv2dGeometry;

namespace {

// {N, C, H, W, OC, KH, KW, stride_h, stride_w, pad_h, pad_w}: batch 1, odd sizes, strides, padding, a
// 1x1 kernel, a kernel as large as the padded input, non-square everything, and batches that end in a
// partial im2col chunk (the chunk holds 1024 / (OH * OW) images).
const std::vector<Conv2dGeometry> kShapes = {
    {1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0},     {1, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1},   {2, 2, 9, 8, 3, 3, 2, 2, 2, 1, 0},
    {3, 5, 6, 6, 7, 1, 1, 1, 1, 0, 0},     {2, 3, 5, 4, 2, 7, 6, 1, 1, 1, 1},   {1, 2, 11, 13, 5, 5, 3, 3, 2, 2, 1},
    {45, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1},    {3, 4, 28, 28, 8, 3, 3, 1, 1, 1, 1}, {5, 32, 14, 14, 16, 3, 3, 1, 1, 1, 1},
    {4, 3, 10, 10, 6, 4, 4, 2, 2, 1, 1},   {0, 3, 5, 5, 2, 3, 3, 1, 1, 1, 1},
    // Stride 1 with OW == W (im2col and col2im by whole planes): fewer rows out than in, more rows out than in, and
    // a padding as wide as the input, where whole taps fall off the plane's edge.
    {2, 2, 9, 6, 3, 5, 3, 1, 1, 1, 1},     {2, 3, 5, 7, 4, 3, 1, 1, 1, 2, 0},   {2, 2, 3, 2, 3, 3, 5, 1, 1, 1, 2},
    // ember's AVX-512 products (kernels/cpu/conv_packed.h: 64+ deep; the forward's with plane taps and 16+ pixels):
    // filters that leave a forward tile of 8 part empty and fill 1, 2, 3 or 4 + 1 vectors of the weight gradient's
    // tiles, images of 20, 24, 25 and 30 pixels (a vector of 16 spanning two, a panel of 48 three), last panels cut
    // short, taps off every edge, a forward 468 deep (two depth blocks), a weight gradient 1200 columns long (three).
    {3, 8, 5, 4, 13, 3, 3, 1, 1, 1, 1},    {2, 7, 6, 5, 9, 5, 3, 1, 1, 2, 1},   {3, 16, 4, 6, 40, 3, 3, 1, 1, 1, 1},
    {2, 52, 5, 5, 24, 3, 3, 1, 1, 1, 1},   {12, 8, 10, 10, 70, 3, 3, 1, 1, 1, 1},
};

std::string describe(const Conv2dGeometry& g) {
  return detail::concat("x (", g.N, ",", g.C, ",", g.H, ",", g.W, ") w (", g.OC, ",", g.C, ",", g.KH, ",", g.KW,
                        ") stride (", g.stride_h, ",", g.stride_w, ") pad (", g.pad_h, ",", g.pad_w, ")");
}

template <typename T> std::vector<T> cast(const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); }
template <typename T> std::vector<double> widen(const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); }

struct ConvData {
  std::vector<double> x, w, b, dy;
  explicit ConvData(const Conv2dGeometry& g, unsigned seed)
      : x(test::random_values<double>(g.N * g.C * g.H * g.W, seed, -1, 1)),
        w(test::random_values<double>(g.OC * g.CKK(), seed + 1, -1, 1)),
        b(test::random_values<double>(g.OC, seed + 2, -1, 1)),
        dy(test::random_values<double>(g.N * g.OC * g.OH() * g.OW(), seed + 3, -1, 1)) {}
};

template <typename T> void check_against_reference(const Conv2dGeometry& g) {
  INFO(describe(g));
  ConvData d(g, 7);
  const auto x = cast<T>(d.x), w = cast<T>(d.w), b = cast<T>(d.b), dy = cast<T>(d.dy);
  const test::Tolerance tol = test::gemm_tolerance<T>(g.CKK() * 2);

  for (bool with_bias : {true, false}) {
    auto y = test::nans<T>(g.N * g.OC * g.OH() * g.OW());
    kernels::cpu::conv2d_forward<T>(g, x.data(), w.data(), with_bias ? b.data() : nullptr, y.data());
    REQUIRE_CLOSE(y, test::conv2d_reference(g, d.x, d.w, with_bias ? &d.b : nullptr), tol);
  }

  auto dx = test::nans<T>(g.N * g.C * g.H * g.W);
  kernels::cpu::conv2d_backward_input<T>(g, dy.data(), w.data(), dx.data());
  REQUIRE_CLOSE(dx, test::conv2d_input_grad_reference(g, d.dy, d.w), tol);

  // Gradients accumulate: start from known values and expect them added to.
  std::vector<double> db_ref;
  std::vector<double> dw_ref = test::conv2d_weight_grad_reference(g, d.x, d.dy, &db_ref);
  std::vector<T> dw(dw_ref.size(), T(0.5)), db(db_ref.size(), T(-0.25));
  for (auto& v : dw_ref) v += 0.5;
  for (auto& v : db_ref) v -= 0.25;
  kernels::cpu::conv2d_backward_weight<T>(g, x.data(), dy.data(), dw.data(), db.data());
  const test::Tolerance long_tol = test::gemm_tolerance<T>(g.N * g.OH() * g.OW() * 2);
  REQUIRE_CLOSE(dw, dw_ref, long_tol);
  REQUIRE_CLOSE(db, db_ref, long_tol);

  // Both gradients in one pass: the two calls' bits, the weight gradient accumulated too.
  auto dx_both = test::nans<T>(dx.size());
  std::vector<T> dw_both(dw.size(), T(0.5)), db_both(db.size(), T(-0.25));
  kernels::cpu::conv2d_backward<T>(g, x.data(), dy.data(), w.data(), dw_both.data(), db_both.data(), dx_both.data());
  CHECK(dx_both == dx);
  CHECK(dw_both == dw);
  CHECK(db_both == db);
  kernels::cpu::conv2d_backward_weight<T>(g, x.data(), dy.data(), dw.data(), nullptr);  // no bias: fine
}

}  // namespace

TEST_CASE("cpu conv2d forward and both gradients match the direct definition (f32, f64)", "[kernels]") {
  using kernels::cpu::HostIsa;
  int own = 0;     // shapes whose float forward and weight gradient ran ember's AVX-512 products
  int own_dx = 0;  // and those whose input gradient did
  for (HostIsa isa : {HostIsa::baseline, HostIsa::avx512}) {
    if (!kernels::cpu::host_isa_available(isa)) continue;
    test::IsaScope scope(isa);
    INFO(kernels::cpu::host_isa_name(isa));
    for (const auto& g : kShapes) {
      check_against_reference<double>(g);
      check_against_reference<float>(g);
#if EMBER_HOST_AVX512
      own += kernels::cpu::packed::forward_applies(g) && kernels::cpu::packed::weight_gradient_applies(g) ? 1 : 0;
      own_dx += kernels::cpu::packed::input_gradient_applies(g) ? 1 : 0;
#endif
    }
  }
  if (kernels::cpu::host_isa_available(HostIsa::avx512)) CHECK(own == 6);
  if (kernels::cpu::host_isa_available(HostIsa::avx512)) CHECK(own_dx == 5);
}

TEST_CASE("cpu conv2d gradients pass a float64 finite-difference check", "[kernels]") {
  // Small shapes with stride 2, padding, batch 1 and odd sizes; f = sum(conv(x, w, b) * R).
  const std::vector<Conv2dGeometry> shapes = {
      {1, 2, 5, 4, 3, 3, 3, 1, 1, 1, 1}, {2, 3, 7, 6, 2, 3, 2, 2, 2, 1, 1}, {3, 1, 4, 5, 2, 2, 3, 1, 2, 0, 1}};
  for (const auto& g : shapes) {
    INFO(describe(g));
    ConvData d(g, 21);
    auto loss = [&](const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b) {
      std::vector<double> y(d.dy.size());
      kernels::cpu::conv2d_forward<double>(g, x.data(), w.data(), b.data(), y.data());
      double s = 0;
      for (size_t i = 0; i < y.size(); ++i) s += y[i] * d.dy[i];
      return s;
    };
    std::vector<double> dx(d.x.size()), dw(d.w.size(), 0.0), db(d.b.size(), 0.0);
    kernels::cpu::conv2d_backward_input<double>(g, d.dy.data(), d.w.data(), dx.data());
    kernels::cpu::conv2d_backward_weight<double>(g, d.x.data(), d.dy.data(), dw.data(), db.data());
    REQUIRE_GRADCHECK(([&](const std::vector<double>& v) { return loss(v, d.w, d.b); }), d.x, dx);
    REQUIRE_GRADCHECK(([&](const std::vector<double>& v) { return loss(d.x, v, d.b); }), d.w, dw);
    REQUIRE_GRADCHECK(([&](const std::vector<double>& v) { return loss(d.x, d.w, v); }), d.b, db);
  }
}

TEST_CASE("cpu conv2d: the same bits at 1, 2 and 3 threads, chunks of images run by any thread", "[kernels]") {
  // Several im2col chunks each (28x28 outputs: 2 images a chunk; 6x6: 43), the last one partial, so the chunks and
  // the images inside a chunk are spread over the threads.
  // The last: ember's AVX-512 products, two chunks of images in two groups.
  const std::vector<Conv2dGeometry> shapes = {{7, 2, 28, 28, 5, 3, 3, 1, 1, 1, 1}, {100, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1},
                                              {40, 16, 7, 7, 10, 3, 3, 1, 1, 1, 1}};
  for (const auto& g : shapes) {
    INFO(describe(g));
    ConvData d(g, 5);
    const auto x = cast<float>(d.x), w = cast<float>(d.w), b = cast<float>(d.b), dy = cast<float>(d.dy);
    std::vector<std::vector<float>> first;
    for (int threads : {1, 2, 3, 2, 3, 2}) {  // repeated: a race between threads shows in some runs only
      test::ThreadsScope scope(threads);
      std::vector<float> y(d.dy.size()), dx(d.x.size()), dw(d.w.size(), 0.5f), db(d.b.size(), -0.25f);
      kernels::cpu::conv2d_forward<float>(g, x.data(), w.data(), b.data(), y.data());
      kernels::cpu::conv2d_backward_input<float>(g, dy.data(), w.data(), dx.data());
      kernels::cpu::conv2d_backward_weight<float>(g, x.data(), dy.data(), dw.data(), db.data());
      std::vector<float> dx_both(d.x.size()), dw_both(d.w.size(), 0.5f), db_both(d.b.size(), -0.25f);
      kernels::cpu::conv2d_backward<float>(g, x.data(), dy.data(), w.data(), dw_both.data(), db_both.data(),
                                           dx_both.data());
      const std::vector<std::vector<float>> results = {y, dx, dw, db, dx_both, dw_both, db_both};
      if (first.empty()) first = results;
      INFO("threads " << threads);
      for (size_t i = 0; i < results.size(); ++i) CHECK(results[i] == first[i]);
    }
  }
}

#if EMBER_HOST_AVX512
// The order kernels/cpu/conv_packed.h promises, written out: depth blocks of 448 (the last two, under 896, halved and
// rounded up to 16), each a chain of fused multiply-adds from 0, added to the total in order. It is what makes the
// products OpenBLAS's SkylakeX bits.
TEST_CASE("cpu conv2d: the AVX-512 products sum blocks of fused multiply-add chains, bit for bit", "[kernels]") {
  using kernels::cpu::HostIsa;
  namespace packed = kernels::cpu::packed;
  if (!kernels::cpu::host_isa_available(HostIsa::avx512)) return;  // nothing of theirs runs here
  test::IsaScope scope(HostIsa::avx512);
  CHECK(packed::depth_block(900) == 448);
  CHECK(packed::depth_block(452) == 240);
  CHECK(packed::depth_block(784) == 400);
  CHECK(packed::depth_block(384) == 384);
  auto blocked = [](int64_t depth, const auto& term) {  // term(k) = {a, b}: the sum of a * b over k
    float total = 0;
    for (int64_t k0 = 0; k0 < depth; k0 += packed::depth_block(depth - k0)) {
      float chain = 0;
      for (int64_t k = k0; k < k0 + packed::depth_block(depth - k0); ++k) {
        const auto [a, b] = term(k);
        chain = std::fma(a, b, chain);
      }
      total = total + chain;
    }
    return total;
  };
  // im2col's entry (k, pixel p of image n): tap (c, kh, kw) of the 3x3 window, padding 1.
  auto tap = [](const Conv2dGeometry& g, const std::vector<float>& x, int64_t n, int64_t k, int64_t p) {
    const int64_t c = k / 9, ih = p / g.W + k % 9 / 3 - 1, iw = p % g.W + k % 3 - 1;
    if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) return 0.0f;
    return x[static_cast<size_t>(((n * g.C + c) * g.H + ih) * g.W + iw)];
  };

  const Conv2dGeometry f{1, 100, 5, 5, 3, 3, 3, 1, 1, 1, 1};  // 900 deep: blocks of 448, 240 and 212
  REQUIRE(packed::forward_applies(f));
  ConvData d(f, 11);
  const auto x = cast<float>(d.x), w = cast<float>(d.w), b = cast<float>(d.b);
  std::vector<float> y(static_cast<size_t>(f.OC * 25));
  kernels::cpu::conv2d_forward<float>(f, x.data(), w.data(), b.data(), y.data());
  for (int64_t o = 0; o < f.OC; ++o)
    for (int64_t p = 0; p < 25; ++p) {
      const float sum = blocked(f.CKK(), [&](int64_t k) {
        return std::pair{w[static_cast<size_t>(o * f.CKK() + k)], tap(f, x, 0, k, p)};
      });
      CHECK(y[static_cast<size_t>(o * 25 + p)] == sum + b[static_cast<size_t>(o)]);
    }

  const Conv2dGeometry g{4, 8, 14, 14, 5, 3, 3, 1, 1, 1, 1};  // one chunk of 784 columns: blocks of 400 and 384
  REQUIRE(packed::weight_gradient_applies(g));
  ConvData e(g, 12);
  const auto gx = cast<float>(e.x), dy = cast<float>(e.dy);
  std::vector<float> dw(static_cast<size_t>(g.OC * g.CKK()), 0.0f);
  kernels::cpu::conv2d_backward_weight<float>(g, gx.data(), dy.data(), dw.data(), nullptr);
  for (int64_t o = 0; o < g.OC; ++o)
    for (int64_t k = 0; k < g.CKK(); ++k) {
      const float sum = blocked(g.N * 196, [&](int64_t q) {
        const int64_t n = q / 196, p = q % 196;
        return std::pair{dy[static_cast<size_t>((n * g.OC + o) * 196 + p)], tap(g, gx, n, k, p)};
      });
      CHECK(dw[static_cast<size_t>(o * g.CKK() + k)] == sum);
    }

  // The input gradient: at each tap a chain over the filters from 0 (weight^T @ dy, one depth block), the taps added
  // in col2im's order from 0. 30 pixels an image (vectors across two images), 9 channels (a second block of 8 with
  // one), taps off every edge.
  const Conv2dGeometry h{3, 9, 5, 6, 20, 3, 3, 1, 1, 1, 1};
  REQUIRE(packed::input_gradient_applies(h));
  ConvData f2(h, 13);
  const auto hw = cast<float>(f2.w), hdy = cast<float>(f2.dy);
  std::vector<float> hdx(f2.x.size());
  kernels::cpu::conv2d_backward_input<float>(h, hdy.data(), hw.data(), hdx.data());
  for (int64_t n = 0; n < h.N; ++n)
    for (int64_t c = 0; c < h.C; ++c)
      for (int64_t i = 0; i < 30; ++i) {
        float total = 0;
        for (int64_t t = 0; t < 9; ++t) {
          const int64_t oh = i / 6 - t / 3 + 1, ow = i % 6 - t % 3 + 1;
          if (oh < 0 || oh >= 5 || ow < 0 || ow >= 6) continue;
          float chain = 0;
          for (int64_t o = 0; o < h.OC; ++o)
            chain = std::fma(hw[static_cast<size_t>((o * h.C + c) * 9 + t)],
                             hdy[static_cast<size_t>((n * h.OC + o) * 30 + oh * 6 + ow)], chain);
          total = total + chain;
        }
        CHECK(hdx[static_cast<size_t>((n * h.C + c) * 30 + i)] == total);
      }
}
#endif

TEST_CASE("cpu conv2d rejects geometries that have no output", "[kernels]") {
  std::vector<float> buf(4096, 0.f);
  auto run = [&](Conv2dGeometry g) { kernels::cpu::conv2d_forward<float>(g, buf.data(), buf.data(), nullptr, buf.data()); };
  CHECK_THROWS_WITH(run({1, 1, 2, 2, 1, 3, 3, 1, 1, 0, 0}),
                    Catch::Contains("the 3x3 kernel does not fit the padded 2x2 input"));
  CHECK_THROWS_AS(run({1, 1, 5, 5, 1, 3, 3, 0, 1, 0, 0}), ValueError);
  CHECK_THROWS_AS(run({1, 1, 5, 5, 1, 3, 3, 1, 1, -1, 0}), ValueError);
  CHECK_THROWS_AS(run({1, 0, 5, 5, 1, 3, 3, 1, 1, 0, 0}), ValueError);
  CHECK_THROWS_AS(run({-1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0}), ValueError);
}
