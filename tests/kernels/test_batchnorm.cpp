// Host batch normalisation against the definition (batch statistics, PyTorch's running-statistics rule,
// eval mode, the fused ReLU), float64 gradient checks in both modes, and the argument rules.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/batchnorm.h"
#include "support/cnn_reference.h"
#include "support/data.h"
#include "support/gradcheck.h"

using namespace ember;
using kernels::BatchNormGeometry;

namespace {

// {N, C, HW}: the CNN's shapes scaled down, batch 1 (HW values per channel), odd sizes, HW = 1 (a
// BatchNorm after a flatten), a tail that the 8-lane sums leave over.
const std::vector<BatchNormGeometry> kShapes = {{4, 3, 25}, {1, 2, 9}, {5, 7, 1}, {3, 4, 13}, {16, 32, 196}, {2, 1, 2}};

struct BnData {
  std::vector<double> x, w, b, rm, rv;
  BnData(const BatchNormGeometry& g, unsigned seed, double offset)
      : x(test::random_values<double>(g.N * g.C * g.HW, seed, offset - 2, offset + 3)),
        w(test::random_values<double>(g.C, seed + 1, 0.5, 1.5)),
        b(test::random_values<double>(g.C, seed + 2, -0.5, 0.5)),
        rm(test::random_values<double>(g.C, seed + 3, -0.2, 0.2)),
        rv(test::random_values<double>(g.C, seed + 4, 0.5, 2)) {}
};

template <typename T> std::vector<T> cast(const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); }

template <typename T> void check_train(const BatchNormGeometry& g, bool relu, double offset) {
  INFO("(N, C, HW) = (" << g.N << ", " << g.C << ", " << g.HW << ") relu " << relu << " offset " << offset);
  BnData d(g, 5, offset);
  const auto x = cast<T>(d.x), w = cast<T>(d.w), b = cast<T>(d.b);
  auto rm = cast<T>(d.rm), rv = cast<T>(d.rv);
  auto y = test::nans<T>(g.N * g.C * g.HW), mean = test::nans<T>(g.C), invstd = test::nans<T>(g.C);
  int64_t tracked = 41;
  kernels::cpu::batch_norm_forward_train<T>(g, {x.data(), w.data(), b.data(), y.data(), mean.data(), invstd.data(),
                                                rm.data(), rv.data(), &tracked, T(0.1), T(1e-5), relu});
  const auto ref = test::batch_norm_train_reference(g, d.x, d.w, d.b, d.rm, d.rv, 0.1, 1e-5, relu);
  const test::Tolerance tol = test::reduce_tolerance<T>();
  REQUIRE_CLOSE(y, ref.y, tol);
  REQUIRE_CLOSE(mean, ref.mean, tol);
  REQUIRE_CLOSE(invstd, ref.invstd, tol);
  REQUIRE_CLOSE(rm, ref.running_mean, tol);
  REQUIRE_CLOSE(rv, ref.running_var, tol);
  CHECK(tracked == 42);
}

// f = sum(bn(x) * R) in float64, as a function of x, weight or bias; the analytic gradients come from
// batch_norm_backward with dy = R. `training` picks batch or running statistics.
void gradcheck_bn(const BatchNormGeometry& g, bool training, bool relu) {
  INFO("(N, C, HW) = (" << g.N << ", " << g.C << ", " << g.HW << ") training " << training << " relu " << relu);
  BnData d(g, 11, 0.3);
  const std::vector<double> r = test::random_values<double>(g.N * g.C * g.HW, 12, -1, 1);
  std::vector<double> y(r.size()), mean(g.C), invstd(g.C);
  auto forward = [&](const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b) {
    std::vector<double> rm = d.rm, rv = d.rv;  // fresh running statistics every call
    if (training) {
      kernels::cpu::batch_norm_forward_train<double>(g, {x.data(), w.data(), b.data(), y.data(), mean.data(),
                                                         invstd.data(), rm.data(), rv.data(), nullptr, 0.1, 1e-5, relu});
    } else {
      kernels::cpu::batch_norm_forward_eval<double>(g, x.data(), w.data(), b.data(), rm.data(), rv.data(), 1e-5, relu,
                                                    y.data(), invstd.data());
      mean = d.rm;
    }
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
    return s;
  };
  forward(d.x, d.w, d.b);
  std::vector<double> dx(d.x.size()), dw(g.C, 0.0), db(g.C, 0.0);
  kernels::cpu::batch_norm_backward<double>(g, {d.x.data(), r.data(), d.w.data(), mean.data(), invstd.data(),
                                                relu ? y.data() : nullptr, dx.data(), dw.data(), db.data(), training});
  REQUIRE_GRADCHECK(([&](const std::vector<double>& v) { return forward(v, d.w, d.b); }), d.x, dx);
  REQUIRE_GRADCHECK(([&](const std::vector<double>& v) { return forward(d.x, v, d.b); }), d.w, dw);
  REQUIRE_GRADCHECK(([&](const std::vector<double>& v) { return forward(d.x, d.w, v); }), d.b, db);
}

}  // namespace

TEST_CASE("cpu batch_norm training forward matches the definition and PyTorch's running-stat rule", "[kernels]") {
  for (const auto& g : kShapes)
    for (bool relu : {false, true}) {
      check_train<double>(g, relu, 0);
      check_train<float>(g, relu, 0);
    }
}

TEST_CASE("cpu batch_norm eval forward uses the running statistics and leaves them alone", "[kernels]") {
  const BatchNormGeometry g{3, 4, 10};
  BnData d(g, 8, 0);
  std::vector<double> y(d.x.size()), invstd(g.C);
  const std::vector<double> rm = d.rm, rv = d.rv;
  kernels::cpu::batch_norm_forward_eval<double>(g, d.x.data(), d.w.data(), d.b.data(), rm.data(), rv.data(), 1e-5,
                                                false, y.data(), invstd.data());
  std::vector<double> expected;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t i = 0; i < g.HW; ++i)
        expected.push_back((d.x[(n * g.C + c) * g.HW + i] - rm[c]) / std::sqrt(rv[c] + 1e-5) * d.w[c] + d.b[c]);
  REQUIRE_CLOSE(y, expected, test::kF64);
  CHECK(rm == d.rm);
  CHECK(rv == d.rv);
  CHECK(invstd[2] == Approx(1 / std::sqrt(rv[2] + 1e-5)));
}

TEST_CASE("cpu batch_norm gradients pass float64 finite-difference checks in both modes, with and without ReLU",
          "[kernels]") {
  for (const BatchNormGeometry& g : {BatchNormGeometry{3, 2, 5}, BatchNormGeometry{1, 3, 7}, BatchNormGeometry{4, 2, 1}})
    for (bool training : {true, false})
      for (bool relu : {false, true}) gradcheck_bn(g, training, relu);
}

TEST_CASE("cpu batch_norm: gradients accumulate, and one value per channel cannot train", "[kernels]") {
  const BatchNormGeometry g{2, 1, 3};
  const std::vector<double> x = {1, 2, 4, 0, -1, 3}, dy = {1, 1, 1, 1, 1, 1};
  std::vector<double> y(6), mean(1), invstd(1), dx(6), dw = {10}, db = {20};
  kernels::cpu::batch_norm_forward_train<double>(g, {x.data(), nullptr, nullptr, y.data(), mean.data(), invstd.data(),
                                                     nullptr, nullptr, nullptr, 0.1, 1e-5, false});
  kernels::cpu::batch_norm_backward<double>(
      g, {x.data(), dy.data(), nullptr, mean.data(), invstd.data(), nullptr, dx.data(), dw.data(), db.data(), true});
  CHECK(db[0] == Approx(26));              // 20 + sum(dy)
  CHECK(dw[0] == Approx(10).margin(1e-9));  // 10 + sum(xhat) = 10 + 0
  const BatchNormGeometry one{1, 2, 1};
  CHECK_THROWS_WITH(kernels::cpu::batch_norm_forward_train<double>(
                        one, {x.data(), nullptr, nullptr, y.data(), mean.data(), invstd.data(), nullptr, nullptr,
                              nullptr, 0.1, 1e-5, false}),
                    Catch::Contains("expected more than 1 value per channel when training"));
}
