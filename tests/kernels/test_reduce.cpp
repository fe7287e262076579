// CPU reductions against plain float64 loops: sum/mean, sum_rows (beta 0/1, tall inputs), argmax (ties, NaN),
// count_correct.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/reduce.h"
#include "support/compare.h"
#include "support/data.h"

namespace k = ember::kernels;
using ember::test::kF32Reduce;
using ember::test::kF64;

using ember::test::random_values;

namespace {

}  // namespace

TEMPLATE_TEST_CASE("cpu sum and mean match a float64 loop", "[kernels]", float, double) {
  for (int64_t n : {1, 2, 7, 1001, 4097, 1000000}) {
    CAPTURE(n);
    auto x = random_values<TestType>(n, 1u + static_cast<unsigned>(n), -1, 3);
    double ref = 0;
    for (auto v : x) ref += static_cast<double>(v);
    std::vector<TestType> out(1, std::numeric_limits<TestType>::quiet_NaN());
    k::cpu::sum(x.data(), n, TestType(1), out.data());
    REQUIRE_CLOSE(out, std::vector<double>{ref}, ember::test::reduce_tolerance<TestType>());
    const auto scale = static_cast<TestType>(1.0 / static_cast<double>(n));
    out[0] = std::numeric_limits<TestType>::quiet_NaN();
    k::cpu::sum(x.data(), n, scale, out.data());
    REQUIRE_CLOSE(out, std::vector<double>{ref * static_cast<double>(scale)}, ember::test::reduce_tolerance<TestType>());
  }
}

TEST_CASE("cpu float sum does not drift over a million equal terms", "[kernels]") {
  // 0.1f added 1e6 times in a float accumulator ends near 100958; a double or blocked sum gives 1e5.
  std::vector<float> x(1000000, 0.1f);
  std::vector<float> out(1);
  k::cpu::sum(x.data(), static_cast<int64_t>(x.size()), 1.0f, out.data());
  REQUIRE_CLOSE(out, std::vector<double>{1e6 * static_cast<double>(0.1f)}, (ember::test::Tolerance{0, 1e-6}));
}

TEST_CASE("cpu sum of nothing is zero", "[kernels]") {
  std::vector<float> out(1, std::numeric_limits<float>::quiet_NaN());
  k::cpu::sum<float>(nullptr, 0, 1.0f, out.data());
  REQUIRE(out[0] == 0.0f);
}

TEMPLATE_TEST_CASE("cpu sum_rows matches a loop for beta 0 and 1", "[kernels]", float, double) {
  // Beyond the small shapes: rows folded into runs (with rows left over), row counts that do not
  // split into four streams evenly, tiles of columns with a partial last one, and no rows at all.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, 1},     {1, 7},     {5, 1},      {3, 33},      {257, 300}, {64, 1000}, {1000, 10},
      {131, 1},   {37, 2500}, {10, 65536}, {16384, 256}, {65537, 3}, {0, 5}};
  for (auto [rows, cols] : shapes) {
    CAPTURE(rows, cols);
    auto x = random_values<TestType>(rows * cols, 7u, -1, 1);
    std::vector<double> ref(static_cast<size_t>(cols), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) ref[c] += static_cast<double>(x[r * cols + c]);

    // beta == 0 must not read out: a NaN there would otherwise poison the result.
    std::vector<TestType> out(static_cast<size_t>(cols), std::numeric_limits<TestType>::quiet_NaN());
    k::cpu::sum_rows(x.data(), rows, cols, TestType(0), out.data());
    REQUIRE_CLOSE(out, ref, ember::test::reduce_tolerance<TestType>());

    auto prior = random_values<TestType>(cols, 9u, -1, 1);
    out = prior;
    k::cpu::sum_rows(x.data(), rows, cols, TestType(1), out.data());
    std::vector<double> ref_acc(ref);
    for (int64_t c = 0; c < cols; ++c) ref_acc[c] += static_cast<double>(prior[c]);
    REQUIRE_CLOSE(out, ref_acc, ember::test::reduce_tolerance<TestType>());
  }
}

TEST_CASE("cpu float sum_rows of tall inputs is within an ulp of float64 and deterministic", "[kernels]") {
  // Float64 accumulation leaves only the final rounding to float: about 6e-8 relative. A float
  // accumulator over 16384 rows would be off by orders of magnitude more.
  const ember::test::Tolerance one_ulp{1e-9, 1.2e-7};
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{16384, 256}, {65536, 10}, {4099, 1500}}) {
    CAPTURE(rows, cols);
    auto x = random_values<float>(rows * cols, 21u, -1, 1);
    std::vector<double> ref(static_cast<size_t>(cols), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) ref[c] += static_cast<double>(x[r * cols + c]);
    std::vector<float> out(static_cast<size_t>(cols)), again(static_cast<size_t>(cols));
    k::cpu::sum_rows(x.data(), rows, cols, 0.0f, out.data());
    REQUIRE_CLOSE(out, ref, one_ulp);
    k::cpu::sum_rows(x.data(), rows, cols, 0.0f, again.data());
    REQUIRE(std::memcmp(out.data(), again.data(), out.size() * sizeof(float)) == 0);
  }
  // 0.1f down a million rows: a float running sum drifts by about 1%.
  const int64_t rows = 1000000, cols = 3;
  std::vector<float> x(static_cast<size_t>(rows * cols), 0.1f), out(cols);
  k::cpu::sum_rows(x.data(), rows, cols, 0.0f, out.data());
  REQUIRE_CLOSE(out, std::vector<double>(cols, 1e6 * static_cast<double>(0.1f)), (ember::test::Tolerance{0, 1e-7}));
}

TEMPLATE_TEST_CASE("cpu argmax_rows: first max on ties, NaN is largest", "[kernels]", float, double) {
  const TestType nan = std::numeric_limits<TestType>::quiet_NaN();
  const TestType inf = std::numeric_limits<TestType>::infinity();
  // (rows=6, cols=4)
  const std::vector<TestType> x = {
      1, 3, 3, 2,             // tie: the first 3 wins
      1, nan, 5, nan,         // NaN beats 5; the first NaN wins
      -inf, -inf, -inf, -inf, // all equal: index 0
      7, 7, 7, 7,             //
      -1, -2, -3, 0.5,        // last column
      nan, 1, 2, 3,           // NaN first
  };
  std::vector<int64_t> out(6, -7);
  k::cpu::argmax_rows(x.data(), 6, 4, out.data());
  REQUIRE(out == std::vector<int64_t>{1, 1, 0, 0, 3, 0});

  std::vector<TestType> column = {4, -1, 2};  // cols == 1: always index 0
  std::vector<int64_t> out1(3, -7);
  k::cpu::argmax_rows(column.data(), 3, 1, out1.data());
  REQUIRE(out1 == std::vector<int64_t>{0, 0, 0});
}

TEMPLATE_TEST_CASE("cpu argmax_rows matches a loop on random rows", "[kernels]", float, double) {
  const int64_t rows = 100, cols = 37;
  auto x = random_values<TestType>(rows * cols, 3u, -1, 1);
  std::vector<int64_t> out(rows, -1), ref(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < cols; ++c)
      if (x[r * cols + c] > x[r * cols + best]) best = c;
    ref[r] = best;
  }
  k::cpu::argmax_rows(x.data(), rows, cols, out.data());
  REQUIRE(out == ref);
}

TEMPLATE_TEST_CASE("cpu count_correct with int32 and int64 labels", "[kernels]", int32_t, int64_t) {
  const int64_t rows = 50, cols = 10;
  auto logits = random_values<float>(rows * cols, 11u, -1, 1);
  std::vector<int64_t> pred(rows);
  k::cpu::argmax_rows(logits.data(), rows, cols, pred.data());
  // Every third row gets a wrong label, so the count is known: rows - ceil(rows / 3).
  std::vector<TestType> labels(rows);
  int64_t expected = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const bool wrong = r % 3 == 0;
    labels[r] = static_cast<TestType>(wrong ? (pred[r] + 1) % cols : pred[r]);
    expected += wrong ? 0 : 1;
  }
  REQUIRE(expected == rows - (rows + 2) / 3);
  std::vector<int64_t> out(1, -1);
  k::cpu::count_correct(logits.data(), labels.data(), rows, cols, out.data());
  REQUIRE(out[0] == expected);

  // Out-of-range and negative labels never count as correct (and are not an error here).
  labels[1] = static_cast<TestType>(cols);
  labels[2] = static_cast<TestType>(-1);
  k::cpu::count_correct(logits.data(), labels.data(), rows, cols, out.data());
  REQUIRE(out[0] == expected - 2);

  std::vector<double> logits64(logits.begin(), logits.end());
  k::cpu::count_correct(logits64.data(), labels.data(), rows, cols, out.data());
  REQUIRE(out[0] == expected - 2);
}
