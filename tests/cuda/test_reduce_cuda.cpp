// CUDA reductions against their CPU twins (NaN-prefilled outputs), plus bitwise determinism of sum.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/cuda_check.h"
#include "kernels/reduce.h"
#include "support/compare.h"
#include "support/data.h"
#include "support/device_array.h"
#include "support/emulated_size.h"

namespace kc = ember::kernels::cpu;
namespace kg = ember::kernels::cuda;

using ember::test::DeviceArray;
using ember::test::nans;
using ember::test::random_values;

namespace {

using Shape = std::pair<int64_t, int64_t>;
const std::vector<Shape> kShapes = {{1, 1},    {1, 33},    {33, 1},   {7, 10},    {3, 31},      {5, 32},
                                    {33, 33},  {17, 1000}, {1000, 3}, {2, 5000},
                                    {ember::test::gpu_or_emulated(4096, 515), 1000},
                                    {ember::test::gpu_or_emulated(65536, 8195), 10}};

}  // namespace

TEMPLATE_TEST_CASE("CUDA sum and mean equal the CPU twin", "[cuda]", float, double) {
  using T = TestType;
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(33), int64_t(1000), int64_t(2049), int64_t(256 * 8 * 5 + 1),
                    int64_t(1000003), int64_t(10000000)}) {
    CAPTURE(n);
    // Values around 1 keep the sum away from 0, so the relative tolerance is meaningful.
    auto x = random_values<T>(n, static_cast<unsigned>(n), -0.5, 2.5);
    DeviceArray<T> dx(x);
    const size_t ws_elems = kg::sum_workspace_elems(n);
    REQUIRE(ws_elems >= 1);
    DeviceArray<T> ws(nans<T>(static_cast<int64_t>(ws_elems)));
    for (T scale : {T(1), static_cast<T>(1.0 / static_cast<double>(n))}) {
      CAPTURE(static_cast<double>(scale));
      std::vector<T> want(1);
      kc::sum(x.data(), n, scale, want.data());
      DeviceArray<T> out(nans<T>(1));
      kg::sum(dx.ptr, n, scale, out.ptr, ws.ptr, nullptr);
      REQUIRE_CLOSE(out.host(), want, ember::test::reduce_tolerance<T>());
    }
  }
}

TEMPLATE_TEST_CASE("CUDA sum is bitwise deterministic", "[cuda]", float, double) {
  using T = TestType;
  const int64_t n = 10000000;
  // Mixed signs: any change of summation order would show in the low bits.
  auto x = random_values<T>(n, 99u, -1, 1);
  DeviceArray<T> dx(x);
  DeviceArray<T> ws(nans<T>(static_cast<int64_t>(kg::sum_workspace_elems(n))));
  DeviceArray<T> a(nans<T>(1)), b(nans<T>(1));
  kg::sum(dx.ptr, n, T(1), a.ptr, ws.ptr, nullptr);
  kg::sum(dx.ptr, n, T(1), b.ptr, ws.ptr, nullptr);
  const T first = a.host()[0], second = b.host()[0];
  REQUIRE(std::isfinite(first));
  REQUIRE(std::memcmp(&first, &second, sizeof(T)) == 0);
}

TEST_CASE("CUDA sum of nothing is zero", "[cuda]") {
  DeviceArray<float> ws(nans<float>(static_cast<int64_t>(kg::sum_workspace_elems(0))));
  DeviceArray<float> dx(std::vector<float>{}), out(nans<float>(1));
  kg::sum(dx.ptr, 0, 1.0f, out.ptr, ws.ptr, nullptr);
  REQUIRE(out.host()[0] == 0.0f);
}

TEMPLATE_TEST_CASE("CUDA sum_rows equals the CPU twin for beta 0 and 1", "[cuda]", float, double) {
  using T = TestType;
  for (auto [rows, cols] : kShapes) {
    CAPTURE(rows, cols);
    auto x = random_values<T>(rows * cols, 4u, -1, 1);
    DeviceArray<T> dx(x);
    // beta == 0: out starts as NaN and must not be read.
    std::vector<T> want(static_cast<size_t>(cols));
    kc::sum_rows(x.data(), rows, cols, T(0), want.data());
    DeviceArray<T> out(nans<T>(cols));
    kg::sum_rows(dx.ptr, rows, cols, T(0), out.ptr, nullptr);
    REQUIRE_CLOSE(out.host(), want, ember::test::reduce_tolerance<T>());
    // beta == 1: accumulate into existing gradients.
    auto prior = random_values<T>(cols, 5u, -1, 1);
    std::vector<T> want_acc(prior);
    kc::sum_rows(x.data(), rows, cols, T(1), want_acc.data());
    DeviceArray<T> out_acc(prior);
    kg::sum_rows(dx.ptr, rows, cols, T(1), out_acc.ptr, nullptr);
    REQUIRE_CLOSE(out_acc.host(), want_acc, ember::test::reduce_tolerance<T>());
  }
}

TEMPLATE_TEST_CASE("CUDA argmax_rows equals the CPU twin, ties and NaN included", "[cuda]", float, double) {
  using T = TestType;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (auto [rows, cols] : kShapes) {
    CAPTURE(rows, cols);
    auto x = random_values<T>(rows * cols, 6u, -1, 1);
    // Quantised values make ties common; a few rows get NaNs (sometimes two) to exercise NaN-is-max.
    for (auto& v : x) v = std::round(v * 4) / 4;
    for (int64_t r = 0; r < rows; r += 5) {
      x[r * cols + (r * 13) % cols] = nan;
      if (r % 10 == 0) x[r * cols + (r * 7) % cols] = nan;
    }
    std::vector<int64_t> want(static_cast<size_t>(rows));
    kc::argmax_rows(x.data(), rows, cols, want.data());
    DeviceArray<T> dx(x);
    DeviceArray<int64_t> out(std::vector<int64_t>(static_cast<size_t>(rows), -7));
    kg::argmax_rows(dx.ptr, rows, cols, out.ptr, nullptr);
    REQUIRE(out.host() == want);
  }
  // Hand-checked rows (rows=3, cols=40): ties across lanes, NaN after the max, all -inf.
  std::vector<T> x(120, T(0));
  x[5] = 2;
  x[37] = 2;  // tie on another lane: index 5 wins
  x[40 + 3] = 1;
  x[40 + 39] = nan;
  x[40 + 35] = nan;  // the first NaN (35) wins
  for (int c = 0; c < 40; ++c) x[80 + c] = -std::numeric_limits<T>::infinity();
  DeviceArray<T> dx(x);
  DeviceArray<int64_t> out(std::vector<int64_t>(3, -7));
  kg::argmax_rows(dx.ptr, 3, 40, out.ptr, nullptr);
  REQUIRE(out.host() == std::vector<int64_t>{5, 35, 0});
}

TEMPLATE_TEST_CASE("CUDA count_correct equals the CPU twin (int32 and int64 labels)", "[cuda]", int32_t, int64_t) {
  using L = TestType;
  for (auto [rows, cols] : kShapes) {
    CAPTURE(rows, cols);
    auto logits = random_values<float>(rows * cols, 8u, -1, 1);
    std::vector<int64_t> pred(static_cast<size_t>(rows));
    kc::argmax_rows(logits.data(), rows, cols, pred.data());
    std::vector<L> labels(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      // A mix of right, wrong and out-of-range labels.
      const int64_t label = r % 4 == 1 ? (pred[r] + 1) % std::max<int64_t>(cols, 2) : (r % 9 == 2 ? -1 : pred[r]);
      labels[r] = static_cast<L>(label);
    }
    std::vector<int64_t> want(1);
    kc::count_correct(logits.data(), labels.data(), rows, cols, want.data());
    DeviceArray<float> dl(logits);
    DeviceArray<L> dlab(labels);
    DeviceArray<int64_t> out(std::vector<int64_t>{123456789});  // garbage: out is set, not added to
    kg::count_correct(dl.ptr, dlab.ptr, rows, cols, out.ptr, nullptr);
    REQUIRE(out.host() == want);

    std::vector<double> logits64(logits.begin(), logits.end());
    DeviceArray<double> dl64(logits64);
    DeviceArray<int64_t> out64(std::vector<int64_t>{-5});
    kg::count_correct(dl64.ptr, dlab.ptr, rows, cols, out64.ptr, nullptr);
    REQUIRE(out64.host() == want);
  }
}
