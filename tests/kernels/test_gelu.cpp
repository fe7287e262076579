// Host GELU in both of PyTorch's forms against long-double references of the definitions, values PyTorch's
// formulas give at known points, the derivative against finite differences in float64, large |x| (finite,
// saturated: what breaks a 1 / cosh^2 or a fast-math build), and the op's argument rules.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/ops.h"
#include "kernels/gelu.h"
#include "support/data.h"
#include "support/gradcheck.h"

using namespace ember;
using kernels::GeluApproximate;

namespace {

// The definitions in long double, written independently of kernels/gelu.h: Phi by erfc, tanh's derivative by
// 1 / cosh^2 (finite for the |x| used here).
long double reference(long double x, GeluApproximate form) {
  if (form == GeluApproximate::None) return x * 0.5L * std::erfc(-x / std::sqrt(2.0L));
  const long double k = std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
  return 0.5L * x * (1 + std::tanh(k * (x + 0.044715L * x * x * x)));
}

long double reference_derivative(long double x, GeluApproximate form) {
  if (form == GeluApproximate::None)
    return 0.5L * std::erfc(-x / std::sqrt(2.0L)) +
           x * std::exp(-x * x / 2) / std::sqrt(2 * 3.14159265358979323846264338327950288L);
  const long double k = std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
  const long double u = k * (x + 0.044715L * x * x * x), sech = 1 / std::cosh(u);
  return 0.5L * (1 + std::tanh(u)) + 0.5L * x * sech * sech * k * (1 + 3 * 0.044715L * x * x);
}

const char* name(GeluApproximate form) { return form == GeluApproximate::Tanh ? "tanh" : "none"; }

template <typename T> void check_against_reference(GeluApproximate form) {
  INFO("approximate " << name(form));
  for (int64_t n : {1, 7, 1000, 8193 + 4099}) {  // past a chunk of the host pool
    const auto x = test::random_values<T>(n, 21, -8, 8), dy = test::random_values<T>(n, 22, -1, 1);
    auto y = test::nans<T>(n), dx = test::nans<T>(n);
    kernels::cpu::gelu<T>(x.data(), y.data(), n, form);
    kernels::cpu::gelu_backward<T>(dy.data(), x.data(), dx.data(), n, form);
    std::vector<double> want_y, want_dx;
    for (int64_t i = 0; i < n; ++i) {
      want_y.push_back(static_cast<double>(reference(x[i], form)));
      want_dx.push_back(static_cast<double>(dy[i] * reference_derivative(x[i], form)));
    }
    REQUIRE_CLOSE(y, want_y, test::reduce_tolerance<T>());
    REQUIRE_CLOSE(dx, want_dx, test::reduce_tolerance<T>());
  }
}

}  // namespace

TEMPLATE_TEST_CASE("cpu gelu and gelu_backward equal the long-double definitions", "[kernels][gelu]", float, double) {
  check_against_reference<TestType>(GeluApproximate::None);
  check_against_reference<TestType>(GeluApproximate::Tanh);
}

TEST_CASE("cpu gelu gives PyTorch's values at known points", "[kernels][gelu]") {
  // torch.nn.functional.gelu(x) and gelu(x, approximate="tanh"): PyTorch's two formulas evaluated with Python's
  // float64 math module (torch itself is not installed on the test machines).
  const std::vector<double> x = {-3, -1, -0.5, 0, 0.5, 1, 3};
  const std::vector<double> exact = {-0.00404969409489031, -0.15865525393145707, -0.15426876936299344, 0,
                                     0.34573123063700656,  0.8413447460685429,   2.99595030590511};
  const std::vector<double> tanh = {-0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0,
                                    0.34571400982514394,    0.8411919906082768,   2.996362607918227};
  std::vector<double> y(x.size());
  kernels::cpu::gelu<double>(x.data(), y.data(), 7, GeluApproximate::None);
  REQUIRE_CLOSE(y, exact, test::kF64);
  kernels::cpu::gelu<double>(x.data(), y.data(), 7, GeluApproximate::Tanh);
  REQUIRE_CLOSE(y, tanh, test::kF64);
}

TEST_CASE("cpu gelu_backward passes the float64 gradient check in both forms", "[kernels][gelu]") {
  const auto x = test::random_values<double>(257, 23, -5, 5), r = test::random_values<double>(257, 24, -1, 1);
  for (GeluApproximate form : {GeluApproximate::None, GeluApproximate::Tanh}) {
    INFO("approximate " << name(form));
    auto f = [&](const std::vector<double>& v) {
      std::vector<double> y(v.size());
      kernels::cpu::gelu<double>(v.data(), y.data(), static_cast<int64_t>(v.size()), form);
      double s = 0;
      for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
      return s;
    };
    std::vector<double> dx(x.size());
    kernels::cpu::gelu_backward<double>(r.data(), x.data(), dx.data(), 257, form);
    REQUIRE_GRADCHECK(f, x, dx);
  }
}

TEMPLATE_TEST_CASE("cpu gelu saturates without NaN for large |x|", "[kernels][gelu]", float, double) {
  using T = TestType;
  const std::vector<T> x = {-1e4, -100, -30, -10, 10, 30, 100, 1e4};
  const std::vector<T> ones(x.size(), T(1));
  for (GeluApproximate form : {GeluApproximate::None, GeluApproximate::Tanh}) {
    INFO("approximate " << name(form));
    auto y = test::nans<T>(8), dx = test::nans<T>(8);
    kernels::cpu::gelu<T>(x.data(), y.data(), 8, form);
    kernels::cpu::gelu_backward<T>(ones.data(), x.data(), dx.data(), 8, form);
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("x = " << x[i]);
      // x or 0 and 1 or 0, up to x phi(x) < 1e-20 (exp underflows past that; nothing may become NaN or inf).
      CHECK(std::fabs(static_cast<double>(y[i]) - (x[i] > 0 ? static_cast<double>(x[i]) : 0.0)) <= 1e-20);
      CHECK(std::fabs(static_cast<double>(dx[i]) - (x[i] > 0 ? 1.0 : 0.0)) <= 1e-20);
    }
  }
}

TEST_CASE("gelu refuses an unknown approximate and checks device, dtype, shape", "[core][gelu]") {
  const Tensor x = Tensor::ones({2, 3});
  CHECK_THROWS_WITH(ops::gelu(x, "fast"),
                    "gelu(): approximate must be \"none\" (the exact erf form) or \"tanh\", got \"fast\"");
  CHECK_THROWS_AS(ops::gelu_backward(x, x, "Tanh"), ValueError);
  CHECK_THROWS_AS(ops::gelu_backward(x, Tensor::empty({4}, DType::F64, Device::meta())), DeviceMismatchError);
  CHECK_THROWS_AS(ops::gelu_backward(x, Tensor::ones({4}, DType::F64)), DTypeError);
  CHECK_THROWS_AS(ops::gelu_backward(x, Tensor::ones({3, 2})), ShapeError);
  CHECK(ops::gelu(Tensor::empty({2, 3}, DType::F32, Device::meta()), "tanh").shape() == Shape{2, 3});
}

// The CUDA twin evaluates gelu_math's formulas with libm-like erff/expf/tanhf; the host's float path (vecmath's
// polynomial exp and erf, tanh through exp) must stay within the registry's gelu tolerance of them: 1e-6 relative
// to max(1, |cpu|), over a dense sweep of [-20, 20] (4 lanes and scalar tails alike) and the extremes.
TEST_CASE("cpu gelu in float stays within 1e-6 of gelu_math's libm formulas in both forms", "[kernels][gelu]") {
  std::vector<float> x;
  for (int i = 0; i <= 400001; ++i) x.push_back(-20.0f + 40.0f * static_cast<float>(i) / 400001.0f);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e4f, -1e4f, 1e30f, -1e30f}) x.push_back(v);
  const auto n = static_cast<int64_t>(x.size());
  const std::vector<float> ones(x.size(), 1.0f);
  for (GeluApproximate form : {GeluApproximate::None, GeluApproximate::Tanh}) {
    INFO("approximate " << name(form));
    auto y = test::nans<float>(n), dx = test::nans<float>(n);
    kernels::cpu::gelu<float>(x.data(), y.data(), n, form);
    kernels::cpu::gelu_backward<float>(ones.data(), x.data(), dx.data(), n, form);
    double worst_y = 0, worst_dx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want_y = kernels::gelu_math::forward(x[i], form), want_dx = kernels::gelu_math::derivative(x[i], form);
      worst_y = std::max(worst_y, std::fabs(y[i] - want_y) / std::max(1.0, std::fabs(double(y[i]))));
      worst_dx = std::max(worst_dx, std::fabs(dx[i] - want_dx) / std::max(1.0, std::fabs(double(dx[i]))));
    }
    CHECK(worst_y <= 1e-6);
    CHECK(worst_dx <= 1e-6);
  }
}
