// Host max pooling against the definition (values and argmax, ties, padding, NaN), backward routing
// (overlapping windows add up), a finite-difference gradient check, and the argument rules.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "base/error.h"
#include "kernels/pool.h"
#include "support/cnn_reference.h"
#include "support/data.h"
#include "support/gradcheck.h"

using namespace ember;
using kernels::Pool2dGeometry;

namespace {

// {N, C, H, W, KH, KW, stride_h, stride_w, pad_h, pad_w}: the CNN's 2x2/2 (both pools: rows of 14 and 7 outputs,
// which end in an overlapping four), odd sizes (the last row and column dropped), overlapping 3x3/2 windows,
// padding, batch 1, non-square, a window as large as the input.
const std::vector<Pool2dGeometry> kShapes = {
    {2, 3, 8, 8, 2, 2, 2, 2, 0, 0},  {1, 2, 7, 5, 2, 2, 2, 2, 0, 0}, {2, 2, 9, 9, 3, 3, 2, 2, 1, 1},
    {1, 1, 6, 7, 3, 2, 1, 2, 1, 1},  {3, 4, 5, 5, 5, 5, 1, 1, 0, 0}, {4, 8, 28, 28, 2, 2, 2, 2, 0, 0},
    {0, 2, 4, 4, 2, 2, 2, 2, 0, 0},  {2, 3, 14, 14, 2, 2, 2, 2, 0, 0}, {1, 2, 11, 11, 2, 2, 2, 2, 0, 0},
};

template <typename T> void check_against_reference(const Pool2dGeometry& g) {
  INFO("x (" << g.N << "," << g.C << "," << g.H << "," << g.W << ") kernel " << g.KH << "x" << g.KW << " stride "
             << g.stride_h << "," << g.stride_w << " pad " << g.pad_h << "," << g.pad_w);
  // Values rounded to a coarse grid so windows hold ties: the first of equal values must win.
  std::vector<double> xd = test::random_values<double>(g.N * g.C * g.H * g.W, 3, -4, 4);
  for (auto& v : xd) v = std::round(v);
  const std::vector<T> x(xd.begin(), xd.end());
  const int64_t out = g.N * g.C * g.OH() * g.OW();
  auto y = test::nans<T>(out);
  std::vector<int32_t> argmax(static_cast<size_t>(out), -7);
  kernels::cpu::max_pool2d_forward<T>(g, x.data(), y.data(), argmax.data());
  const test::PoolReference ref = test::max_pool2d_reference(g, xd);
  REQUIRE_CLOSE(y, ref.y, test::kExact);
  REQUIRE(argmax == ref.argmax);

  // Backward: every dy lands on its window's argmax, summed where windows share it.
  std::vector<double> dyd = test::random_values<double>(out, 4, -1, 1);
  const std::vector<T> dy(dyd.begin(), dyd.end());
  std::vector<double> expected(x.size(), 0.0);
  for (int64_t plane = 0; plane < g.N * g.C; ++plane)
    for (int64_t p = 0; p < g.OH() * g.OW(); ++p) {
      const int64_t k = plane * g.OH() * g.OW() + p;
      expected[plane * g.H * g.W + ref.argmax[k]] += static_cast<double>(dy[k]);
    }
  auto dx = test::nans<T>(static_cast<int64_t>(x.size()));
  kernels::cpu::max_pool2d_backward<T>(g, dy.data(), argmax.data(), dx.data());
  REQUIRE_CLOSE(dx, expected, test::tolerance_for<T>());
}

}  // namespace

TEST_CASE("cpu max_pool2d matches the definition, argmax included, and routes gradients back", "[kernels]") {
  for (const auto& g : kShapes) {
    check_against_reference<float>(g);
    check_against_reference<double>(g);
  }
}

TEST_CASE("cpu max_pool2d: the first NaN wins its window, else the first maximum, -inf windows their first pixel",
          "[kernels]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Four 2x2 windows: {1, NaN / 5, 2}, all -inf, {3, 3 / 3, 4}, {0, 0 / NaN, 0}.
  const std::vector<float> x = {1, nan, -inf, -inf, 3, 3, 0, 0, 5, 2, -inf, -inf, 3, 4, nan, 0};
  // The same windows through the 2x2/2 fast path (float: four at a time), the generic loop (stride 1 down
  // a 2-row input), and in double (the fast path's scalar form).
  for (const Pool2dGeometry& g : {Pool2dGeometry{1, 1, 2, 8, 2, 2, 2, 2, 0, 0}, Pool2dGeometry{1, 1, 2, 8, 2, 2, 1, 2, 0, 0}}) {
    INFO("stride_h " << g.stride_h);
    std::vector<float> y(4);
    std::vector<int32_t> argmax(4);
    kernels::cpu::max_pool2d_forward<float>(g, x.data(), y.data(), argmax.data());
    CHECK(std::isnan(y[0]));
    CHECK(y[1] == -inf);
    CHECK(y[2] == 4);
    CHECK(std::isnan(y[3]));
    CHECK(argmax == std::vector<int32_t>{1, 2, 13, 14});
    const std::vector<double> xd(x.begin(), x.end());
    std::vector<double> yd(4);
    kernels::cpu::max_pool2d_forward<double>(g, xd.data(), yd.data(), argmax.data());
    CHECK(argmax == std::vector<int32_t>{1, 2, 13, 14});
  }
}

TEST_CASE("cpu max_pool2d gradient passes a float64 finite-difference check", "[kernels]") {
  // Distinct values (a random permutation-like spread) keep every argmax away from a tie.
  for (const Pool2dGeometry& g : {Pool2dGeometry{2, 2, 5, 6, 2, 2, 2, 2, 0, 0}, Pool2dGeometry{1, 3, 7, 7, 3, 3, 2, 2, 1, 1}}) {
    std::vector<double> x = test::random_values<double>(g.N * g.C * g.H * g.W, 9, -1, 1);
    const int64_t out = g.N * g.C * g.OH() * g.OW();
    const std::vector<double> r = test::random_values<double>(out, 10, -1, 1);
    std::vector<double> y(static_cast<size_t>(out));
    std::vector<int32_t> argmax(static_cast<size_t>(out));
    auto loss = [&](const std::vector<double>& v) {
      kernels::cpu::max_pool2d_forward<double>(g, v.data(), y.data(), argmax.data());
      double s = 0;
      for (int64_t i = 0; i < out; ++i) s += y[i] * r[i];
      return s;
    };
    loss(x);
    std::vector<double> dx(x.size());
    kernels::cpu::max_pool2d_backward<double>(g, r.data(), argmax.data(), dx.data());
    REQUIRE_GRADCHECK(loss, x, dx);
  }
}

TEST_CASE("cpu max_pool2d rejects padding over half the kernel and windows that do not fit", "[kernels]") {
  std::vector<float> buf(256);
  std::vector<int32_t> idx(256);
  auto run = [&](Pool2dGeometry g) { kernels::cpu::max_pool2d_forward<float>(g, buf.data(), buf.data(), idx.data()); };
  CHECK_THROWS_WITH(run({1, 1, 4, 4, 2, 2, 2, 2, 2, 0}), Catch::Contains("padding must be between 0 and half the kernel"));
  CHECK_THROWS_WITH(run({1, 1, 1, 4, 2, 2, 2, 2, 0, 0}), Catch::Contains("window does not fit"));
  CHECK_THROWS_AS(run({1, 1, 4, 4, 2, 2, 0, 2, 0, 0}), ValueError);
  CHECK_THROWS_AS(run({1, 1, 4, 4, 0, 2, 2, 2, 0, 0}), ValueError);
}
