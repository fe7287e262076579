// CPU softmax / log-softmax / fused cross-entropy against float64 references, edge cases
// (+-1e4 logits, identical rows, one class), label errors, and finite-difference gradient checks.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/softmax_xent.h"
#include "support/compare.h"
#include "support/data.h"
#include "support/gradcheck.h"

namespace k = ember::kernels;
using ember::test::kF32Reduce;
using ember::test::kF64;

using ember::test::random_values;

namespace {

template <typename T> std::vector<T> nans(int64_t n) {
  return std::vector<T>(static_cast<size_t>(n), std::numeric_limits<T>::quiet_NaN());
}

// Float64 references (max-shifted, so they stay exact for large logits).
template <typename T> double ref_logsumexp(const std::vector<T>& x, int64_t r, int64_t cols) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(x[r * cols + c]));
  double s = 0;
  for (int64_t c = 0; c < cols; ++c) s += std::exp(static_cast<double>(x[r * cols + c]) - m);
  return m + std::log(s);
}

template <typename T> std::vector<double> ref_log_softmax(const std::vector<T>& x, int64_t rows, int64_t cols) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double lse = ref_logsumexp(x, r, cols);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<double>(x[r * cols + c]) - lse;
  }
  return y;
}

template <typename T> std::vector<double> ref_softmax(const std::vector<T>& x, int64_t rows, int64_t cols) {
  auto y = ref_log_softmax(x, rows, cols);
  for (auto& v : y) v = std::exp(v);
  return y;
}

template <typename T> void require_rows_sum_to(const std::vector<T>& y, int64_t rows, int64_t cols, double target,
                                               double atol) {
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(y[r * cols + c]);
    INFO("row " << r << " sums to " << s);
    REQUIRE(std::fabs(s - target) <= atol);
  }
}

const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 1}, {4, 1}, {3, 10}, {7, 33}, {2, 1000}, {5, 1500}};

}  // namespace

TEMPLATE_TEST_CASE("cpu softmax and log_softmax match float64", "[kernels]", float, double) {
  for (auto [rows, cols] : kShapes) {
    CAPTURE(rows, cols);
    auto x = random_values<TestType>(rows * cols, 5u, -3, 3);
    auto y = nans<TestType>(rows * cols);
    k::cpu::softmax(x.data(), y.data(), rows, cols);
    REQUIRE_CLOSE(y, ref_softmax(x, rows, cols), ember::test::reduce_tolerance<TestType>());
    require_rows_sum_to(y, rows, cols, 1.0, 1e-5);

    auto ly = nans<TestType>(rows * cols);
    k::cpu::log_softmax(x.data(), ly.data(), rows, cols);
    REQUIRE_CLOSE(ly, ref_log_softmax(x, rows, cols), ember::test::reduce_tolerance<TestType>());
  }
}

TEMPLATE_TEST_CASE("cpu softmax backward formulas match float64", "[kernels]", float, double) {
  for (auto [rows, cols] : kShapes) {
    CAPTURE(rows, cols);
    auto x = random_values<TestType>(rows * cols, 6u, -3, 3);
    auto dy = random_values<TestType>(rows * cols, 8u, -1, 1);
    auto y = nans<TestType>(rows * cols), ly = nans<TestType>(rows * cols);
    k::cpu::softmax(x.data(), y.data(), rows, cols);
    k::cpu::log_softmax(x.data(), ly.data(), rows, cols);

    std::vector<double> ref(x.size()), lref(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double dot = 0, total = 0;
      for (int64_t c = 0; c < cols; ++c) {
        dot += static_cast<double>(dy[r * cols + c]) * static_cast<double>(y[r * cols + c]);
        total += static_cast<double>(dy[r * cols + c]);
      }
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        ref[i] = static_cast<double>(y[i]) * (static_cast<double>(dy[i]) - dot);
        lref[i] = static_cast<double>(dy[i]) - std::exp(static_cast<double>(ly[i])) * total;
      }
    }
    auto dx = nans<TestType>(rows * cols);
    k::cpu::softmax_backward(y.data(), dy.data(), dx.data(), rows, cols);
    REQUIRE_CLOSE(dx, ref, ember::test::reduce_tolerance<TestType>());
    auto ldx = nans<TestType>(rows * cols);
    k::cpu::log_softmax_backward(ly.data(), dy.data(), ldx.data(), rows, cols);
    REQUIRE_CLOSE(ldx, lref, ember::test::reduce_tolerance<TestType>());
  }
}

TEMPLATE_TEST_CASE("cpu softmax_xent matches a float64 logsumexp reference", "[kernels]", float, double) {
  for (auto [rows, cols] : kShapes) {
    CAPTURE(rows, cols);
    auto x = random_values<TestType>(rows * cols, 12u, -3, 3);
    std::vector<int32_t> labels32(static_cast<size_t>(rows));
    std::vector<int64_t> labels64(static_cast<size_t>(rows));
    std::vector<double> ref_loss(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      labels64[r] = (r * 7 + 3) % cols;
      labels32[r] = static_cast<int32_t>(labels64[r]);
      ref_loss[r] = ref_logsumexp(x, r, cols) - static_cast<double>(x[r * cols + labels64[r]]);
    }
    auto probs = nans<TestType>(rows * cols), loss = nans<TestType>(rows);
    k::cpu::softmax_xent_forward(x.data(), labels64.data(), probs.data(), loss.data(), rows, cols);
    REQUIRE_CLOSE(probs, ref_softmax(x, rows, cols), ember::test::reduce_tolerance<TestType>());
    REQUIRE_CLOSE(loss, ref_loss, ember::test::reduce_tolerance<TestType>());

    auto probs32 = nans<TestType>(rows * cols), loss32 = nans<TestType>(rows);
    k::cpu::softmax_xent_forward(x.data(), labels32.data(), probs32.data(), loss32.data(), rows, cols);
    REQUIRE_CLOSE(probs32, probs, ember::test::kExact);
    REQUIRE_CLOSE(loss32, loss, ember::test::kExact);

    const auto scale = static_cast<TestType>(0.25);
    std::vector<double> ref_grad(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref_grad[i] = static_cast<double>(probs[i]) * 0.25;
    for (int64_t r = 0; r < rows; ++r) ref_grad[r * cols + labels64[r]] -= 0.25;
    auto grad = nans<TestType>(rows * cols);
    k::cpu::softmax_xent_backward(probs.data(), labels32.data(), scale, grad.data(), rows, cols);
    REQUIRE_CLOSE(grad, ref_grad, ember::test::reduce_tolerance<TestType>());
    require_rows_sum_to(grad, rows, cols, 0.0, 1e-6);
  }
}

TEMPLATE_TEST_CASE("cpu softmax_xent edge cases stay finite", "[kernels]", float, double) {
  SECTION("logits of +-1e4") {
    // A naive exp(1e4) overflows to inf and the loss becomes NaN.
    const std::vector<TestType> x = {1e4, -1e4, 0, 1e4 - 1,  //
                                     -1e4, -1e4, -1e4, -1e4 + 2};
    const std::vector<int64_t> labels = {1, 3};
    auto probs = nans<TestType>(8), loss = nans<TestType>(2);
    k::cpu::softmax_xent_forward(x.data(), labels.data(), probs.data(), loss.data(), 2, 4);
    REQUIRE_CLOSE(probs, ref_softmax(x, 2, 4), ember::test::reduce_tolerance<TestType>());
    const std::vector<double> ref_loss = {ref_logsumexp(x, 0, 4) + 1e4, ref_logsumexp(x, 1, 4) - (-1e4 + 2)};
    REQUIRE(ref_loss[0] == Approx(2e4 + std::log1p(std::exp(-1.0))).epsilon(1e-12));
    REQUIRE_CLOSE(loss, ref_loss, ember::test::reduce_tolerance<TestType>());
    auto ly = nans<TestType>(8);
    k::cpu::log_softmax(x.data(), ly.data(), 2, 4);
    REQUIRE_CLOSE(ly, ref_log_softmax(x, 2, 4), ember::test::reduce_tolerance<TestType>());
    auto grad = nans<TestType>(8);
    k::cpu::softmax_xent_backward(probs.data(), labels.data(), TestType(1), grad.data(), 2, 4);
    require_rows_sum_to(grad, 2, 4, 0.0, 1e-6);
  }
  SECTION("identical rows: uniform probabilities, loss log(cols)") {
    const int64_t rows = 3, cols = 10;
    std::vector<TestType> x(rows * cols, TestType(2.5));
    const std::vector<int32_t> labels = {0, 9, 4};
    auto probs = nans<TestType>(rows * cols), loss = nans<TestType>(rows);
    k::cpu::softmax_xent_forward(x.data(), labels.data(), probs.data(), loss.data(), rows, cols);
    REQUIRE_CLOSE(probs, std::vector<double>(rows * cols, 0.1), ember::test::reduce_tolerance<TestType>());
    REQUIRE_CLOSE(loss, std::vector<double>(rows, std::log(10.0)), ember::test::reduce_tolerance<TestType>());
    auto grad = nans<TestType>(rows * cols);
    k::cpu::softmax_xent_backward(probs.data(), labels.data(), TestType(1) / rows, grad.data(), rows, cols);
    require_rows_sum_to(grad, rows, cols, 0.0, 1e-6);
  }
  SECTION("one class: probability 1, zero loss and gradient") {
    const std::vector<TestType> x = {-3, 0, 1e4};
    const std::vector<int64_t> labels = {0, 0, 0};
    auto probs = nans<TestType>(3), loss = nans<TestType>(3), grad = nans<TestType>(3);
    k::cpu::softmax_xent_forward(x.data(), labels.data(), probs.data(), loss.data(), 3, 1);
    REQUIRE_CLOSE(probs, std::vector<double>(3, 1.0), ember::test::reduce_tolerance<TestType>());
    REQUIRE_CLOSE(loss, std::vector<double>(3, 0.0), ember::test::reduce_tolerance<TestType>());
    k::cpu::softmax_xent_backward(probs.data(), labels.data(), TestType(1), grad.data(), 3, 1);
    require_rows_sum_to(grad, 3, 1, 0.0, 1e-6);
  }
}

TEMPLATE_TEST_CASE("cpu softmax_xent rejects out-of-range labels naming the row", "[kernels]", int32_t, int64_t) {
  const int64_t rows = 5, cols = 10;
  auto x = random_values<float>(rows * cols, 2u, -3, 3);
  std::vector<TestType> labels = {1, 2, 3, 12, 4};
  auto probs = nans<float>(rows * cols), loss = nans<float>(rows);
  CHECK_THROWS_AS(k::cpu::softmax_xent_forward(x.data(), labels.data(), probs.data(), loss.data(), rows, cols),
                  ember::ValueError);
  CHECK_THROWS_WITH(k::cpu::softmax_xent_forward(x.data(), labels.data(), probs.data(), loss.data(), rows, cols),
                    "cross_entropy(): label 12 at row 3 is out of range for 10 classes (valid 0..9)");
  // The labels are checked before anything is written.
  REQUIRE(std::isnan(loss[0]));
  REQUIRE(std::isnan(probs[0]));

  labels = {0, -1, 3, 4, 5};
  CHECK_THROWS_WITH(k::cpu::softmax_xent_forward(x.data(), labels.data(), probs.data(), loss.data(), rows, cols),
                    Catch::Contains("label -1 at row 1"));
  auto grad = nans<float>(rows * cols);
  CHECK_THROWS_AS(k::cpu::softmax_xent_backward(probs.data(), labels.data(), 1.0f, grad.data(), rows, cols),
                  ember::ValueError);
  labels = {0, 1, 2, 3, 10};  // == cols: one past the end
  CHECK_THROWS_WITH(k::cpu::softmax_xent_forward(x.data(), labels.data(), probs.data(), loss.data(), rows, cols),
                    Catch::Contains("label 10 at row 4"));
}

TEST_CASE("cpu softmax, log_softmax and xent pass finite-difference gradient checks", "[kernels]") {
  const int64_t rows = 3, cols = 5;
  const auto x0 = random_values<double>(rows * cols, 21u, -2, 2);
  const auto w = random_values<double>(rows * cols, 22u, -1, 1);  // f(x) = sum(w * op(x))
  const int64_t n = rows * cols;

  SECTION("softmax") {
    auto f = [&](const std::vector<double>& x) {
      std::vector<double> y(n);
      k::cpu::softmax(x.data(), y.data(), rows, cols);
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += w[i] * y[i];
      return s;
    };
    std::vector<double> y(n), dx(n);
    k::cpu::softmax(x0.data(), y.data(), rows, cols);
    k::cpu::softmax_backward(y.data(), w.data(), dx.data(), rows, cols);
    REQUIRE_GRADCHECK(f, x0, dx);
  }
  SECTION("log_softmax") {
    auto f = [&](const std::vector<double>& x) {
      std::vector<double> y(n);
      k::cpu::log_softmax(x.data(), y.data(), rows, cols);
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += w[i] * y[i];
      return s;
    };
    std::vector<double> y(n), dx(n);
    k::cpu::log_softmax(x0.data(), y.data(), rows, cols);
    k::cpu::log_softmax_backward(y.data(), w.data(), dx.data(), rows, cols);
    REQUIRE_GRADCHECK(f, x0, dx);
  }
  SECTION("softmax_xent mean loss") {
    const std::vector<int64_t> labels = {4, 0, 2};
    auto f = [&](const std::vector<double>& x) {
      std::vector<double> probs(n), loss(rows);
      k::cpu::softmax_xent_forward(x.data(), labels.data(), probs.data(), loss.data(), rows, cols);
      double s = 0;
      for (double l : loss) s += l;
      return s / static_cast<double>(rows);
    };
    std::vector<double> probs(n), loss(rows), grad(n);
    k::cpu::softmax_xent_forward(x0.data(), labels.data(), probs.data(), loss.data(), rows, cols);
    k::cpu::softmax_xent_backward(probs.data(), labels.data(), 1.0 / static_cast<double>(rows), grad.data(), rows,
                                  cols);
    REQUIRE_GRADCHECK(f, x0, grad);
  }
}
