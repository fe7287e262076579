// CUDA softmax / log-softmax / fused cross-entropy against their CPU twins over warp- and
// block-per-row shapes (NaN-prefilled outputs), large logits, and the bad-label flag.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/cuda_check.h"
#include "kernels/softmax_xent.h"
#include "support/compare.h"
#include "support/data.h"
#include "support/device_array.h"

namespace kc = ember::kernels::cpu;
namespace kg = ember::kernels::cuda;

using ember::test::DeviceArray;
using ember::test::nans;
using ember::test::random_values;

namespace {

// Every warp-kernel shape class (group widths 1..32, 1..32 registers per lane), the 1024/1025
// switch to the block-per-row kernel, and the large cases.
using Shape = std::pair<int64_t, int64_t>;
const std::vector<Shape> kShapes = {{1, 1},    {7, 1},     {33, 2},    {5, 3},      {33, 10},  {9, 16},
                                    {9, 17},   {3, 31},    {3, 33},    {100, 100},  {7, 513},  {7, 1000},
                                    {7, 1024}, {5, 1025},  {3, 5000},  {1, 40000},  {4096, 1000}, {65536, 10}};

template <typename L> std::vector<L> make_labels(int64_t rows, int64_t cols) {
  std::vector<L> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) labels[r] = static_cast<L>((r * 7919 + 3) % cols);
  return labels;
}

}  // namespace

TEMPLATE_TEST_CASE("CUDA softmax and log_softmax equal the CPU twin", "[cuda]", float, double) {
  using T = TestType;
  for (auto [rows, cols] : kShapes) {
    CAPTURE(rows, cols);
    const int64_t n = rows * cols;
    auto x = random_values<T>(n, 31u, -4, 4);
    DeviceArray<T> dx(x);
    std::vector<T> want(static_cast<size_t>(n));
    kc::softmax(x.data(), want.data(), rows, cols);
    DeviceArray<T> y(nans<T>(n));
    kg::softmax(dx.ptr, y.ptr, rows, cols, nullptr);
    REQUIRE_CLOSE(y.host(), want, ember::test::reduce_tolerance<T>());

    kc::log_softmax(x.data(), want.data(), rows, cols);
    DeviceArray<T> ly(nans<T>(n));
    kg::log_softmax(dx.ptr, ly.ptr, rows, cols, nullptr);
    REQUIRE_CLOSE(ly.host(), want, ember::test::reduce_tolerance<T>());
  }
}

TEMPLATE_TEST_CASE("CUDA softmax and log_softmax backward equal the CPU twin", "[cuda]", float, double) {
  using T = TestType;
  for (auto [rows, cols] : kShapes) {
    CAPTURE(rows, cols);
    const int64_t n = rows * cols;
    auto x = random_values<T>(n, 32u, -4, 4);
    auto dy = random_values<T>(n, 33u, -1, 1);
    std::vector<T> y(static_cast<size_t>(n)), ly(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    kc::softmax(x.data(), y.data(), rows, cols);
    kc::log_softmax(x.data(), ly.data(), rows, cols);
    DeviceArray<T> dy_d(dy), y_d(y), ly_d(ly);

    kc::softmax_backward(y.data(), dy.data(), want.data(), rows, cols);
    DeviceArray<T> dx(nans<T>(n));
    kg::softmax_backward(y_d.ptr, dy_d.ptr, dx.ptr, rows, cols, nullptr);
    REQUIRE_CLOSE(dx.host(), want, ember::test::reduce_tolerance<T>());

    kc::log_softmax_backward(ly.data(), dy.data(), want.data(), rows, cols);
    DeviceArray<T> ldx(nans<T>(n));
    kg::log_softmax_backward(ly_d.ptr, dy_d.ptr, ldx.ptr, rows, cols, nullptr);
    REQUIRE_CLOSE(ldx.host(), want, ember::test::reduce_tolerance<T>());
  }
}

TEMPLATE_TEST_CASE("CUDA softmax_xent forward and backward equal the CPU twin", "[cuda]", float, double) {
  using T = TestType;
  for (auto [rows, cols] : kShapes) {
    CAPTURE(rows, cols);
    const int64_t n = rows * cols;
    auto x = random_values<T>(n, 34u, -4, 4);
    // Some rows at +-1e4: the max shift must keep them finite.
    for (int64_t r = 0; r < rows; r += 3)
      for (int64_t c = 0; c < cols; ++c) x[r * cols + c] *= T(2500);
    auto labels64 = make_labels<int64_t>(rows, cols);
    auto labels32 = make_labels<int32_t>(rows, cols);
    std::vector<T> want_probs(static_cast<size_t>(n)), want_loss(static_cast<size_t>(rows));
    kc::softmax_xent_forward(x.data(), labels64.data(), want_probs.data(), want_loss.data(), rows, cols);
    const T scale = T(1) / static_cast<T>(rows);
    std::vector<T> want_grad(static_cast<size_t>(n));
    kc::softmax_xent_backward(want_probs.data(), labels64.data(), scale, want_grad.data(), rows, cols);

    DeviceArray<T> dx(x);
    DeviceArray<int64_t> dl64(labels64);
    DeviceArray<int32_t> dl32(labels32);
    for (bool wide_labels : {true, false}) {
      CAPTURE(wide_labels);
      DeviceArray<T> probs(nans<T>(n)), loss(nans<T>(rows)), grad(nans<T>(n));
      DeviceArray<int64_t> bad_row(std::vector<int64_t>{-1});
      if (wide_labels) {
        kg::softmax_xent_forward(dx.ptr, dl64.ptr, probs.ptr, loss.ptr, rows, cols, bad_row.ptr, nullptr);
        kg::softmax_xent_backward(probs.ptr, dl64.ptr, scale, grad.ptr, rows, cols, nullptr);
      } else {
        kg::softmax_xent_forward(dx.ptr, dl32.ptr, probs.ptr, loss.ptr, rows, cols, bad_row.ptr, nullptr);
        kg::softmax_xent_backward(probs.ptr, dl32.ptr, scale, grad.ptr, rows, cols, nullptr);
      }
      REQUIRE_CLOSE(probs.host(), want_probs, ember::test::reduce_tolerance<T>());
      REQUIRE_CLOSE(loss.host(), want_loss, ember::test::reduce_tolerance<T>());
      REQUIRE_CLOSE(grad.host(), want_grad, ember::test::reduce_tolerance<T>());
      REQUIRE(bad_row.host()[0] == -1);
    }
  }
}

TEMPLATE_TEST_CASE("CUDA softmax_xent flags bad labels with NaN loss and the first bad row", "[cuda]", int32_t,
                   int64_t) {
  using L = TestType;
  // 10 classes (warp kernel) and 3000 classes (block-per-row kernel).
  for (int64_t cols : {int64_t(10), int64_t(3000)}) {
    CAPTURE(cols);
    const int64_t rows = 40;
    auto x = random_values<float>(rows * cols, 35u, -4, 4);
    auto labels = make_labels<L>(rows, cols);
    std::vector<float> want_probs(static_cast<size_t>(rows * cols)), want_loss(static_cast<size_t>(rows));
    kc::softmax_xent_forward(x.data(), labels.data(), want_probs.data(), want_loss.data(), rows, cols);
    // Bad labels at rows 29 (== cols), 7 (negative) and 12 (far out); the smallest row is reported.
    labels[29] = static_cast<L>(cols);
    labels[7] = static_cast<L>(-3);
    labels[12] = static_cast<L>(1000000);
    DeviceArray<float> dx(x), probs(nans<float>(rows * cols)), loss(nans<float>(rows));
    DeviceArray<L> dl(labels);
    DeviceArray<int64_t> bad_row(std::vector<int64_t>{-1});
    kg::softmax_xent_forward(dx.ptr, dl.ptr, probs.ptr, loss.ptr, rows, cols, bad_row.ptr, nullptr);
    REQUIRE(bad_row.host()[0] == 7);
    auto got_loss = loss.host();
    for (int64_t r = 0; r < rows; ++r) {
      CAPTURE(r);
      const bool bad = r == 7 || r == 12 || r == 29;
      REQUIRE(std::isnan(got_loss[r]) == bad);
      if (bad) want_loss[r] = std::numeric_limits<float>::quiet_NaN();  // compare() accepts NaN == NaN
    }
    REQUIRE_CLOSE(got_loss, want_loss, ember::test::kF32Reduce);
    REQUIRE_CLOSE(probs.host(), want_probs, ember::test::kF32Reduce);  // probs do not depend on labels

    // The backward must not touch memory for bad labels either: bad rows get probs * scale.
    DeviceArray<float> grad(nans<float>(rows * cols));
    kg::softmax_xent_backward(probs.ptr, dl.ptr, 1.0f, grad.ptr, rows, cols, nullptr);
    auto got_grad = grad.host(), got_probs = probs.host();
    for (int64_t r : {int64_t(7), int64_t(12), int64_t(29)})
      for (int64_t c = 0; c < cols; ++c) REQUIRE(got_grad[r * cols + c] == got_probs[r * cols + c]);
  }
}
