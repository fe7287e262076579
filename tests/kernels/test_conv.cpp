// Host conv2d kernels against the direct float64 definition (forward, input and weight gradients, bias
// null or not, gradients accumulated), finite-difference gradient checks, and the argument rules.
#include <catch2/catch.hpp>

#include <vector>

#include "base/error.h"
#include "kernels/conv.h"
#include "support/cnn_reference.h"
#include "support/data.h"
#include "support/gradcheck.h"
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
  kernels::cpu::conv2d_backward_weight<T>(g, x.data(), dy.data(), dw.data(), nullptr);  // no bias: fine
}

}  // namespace

TEST_CASE("cpu conv2d forward and both gradients match the direct definition (f32, f64)", "[kernels]") {
  for (const auto& g : kShapes) {
    check_against_reference<double>(g);
    check_against_reference<float>(g);
  }
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
  const std::vector<Conv2dGeometry> shapes = {{7, 2, 28, 28, 5, 3, 3, 1, 1, 1, 1}, {100, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1}};
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
      const std::vector<std::vector<float>> results = {y, dx, dw, db};
      if (first.empty()) first = results;
      INFO("threads " << threads);
      for (size_t i = 0; i < results.size(); ++i) CHECK(results[i] == first[i]);
    }
  }
}

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
