// The one tolerance helper of the tests: compares two arrays elementwise with
// |a - e| <= atol + rtol * |e| and reports the max absolute and relative error on failure.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace ember::test {

struct Tolerance {
  double atol, rtol;
};

// Tolerances used across the tests, in one place.
inline constexpr Tolerance kExact{0, 0};
inline constexpr Tolerance kF32{1e-6, 1e-5};      // elementwise float ops
inline constexpr Tolerance kF32Reduce{1e-5, 1e-4};  // float sums, softmax, GEMM with small K
inline constexpr Tolerance kF64{1e-12, 1e-10};
// GEMM in float against a double reference: the error grows with the reduction length K.
inline Tolerance gemm_f32(int64_t K) { return {1e-5 * std::sqrt(static_cast<double>(K) + 1), 1e-4}; }

struct Comparison {
  bool ok = true;
  double max_abs = 0, max_rel = 0;
  int64_t worst = -1, mismatches = 0;
  std::string report;
};

template <typename A, typename E>
Comparison compare(const std::vector<A>& actual, const std::vector<E>& expected, Tolerance tol) {
  Comparison c;
  std::ostringstream out;
  if (actual.size() != expected.size()) {
    c.ok = false;
    out << "size mismatch: actual " << actual.size() << " vs expected " << expected.size();
    c.report = out.str();
    return c;
  }
  double worst_excess = -1;
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = static_cast<double>(actual[i]), e = static_cast<double>(expected[i]);
    double abs_err = std::fabs(a - e);
    bool bad = !(abs_err <= tol.atol + tol.rtol * std::fabs(e));  // NaN fails
    if (std::isnan(a) && std::isnan(e)) bad = false;
    if (std::isinf(e) && a == e) { bad = false; abs_err = 0; }
    double rel = abs_err / std::max(std::fabs(e), 1e-30);
    if (!std::isnan(abs_err)) {
      c.max_abs = std::max(c.max_abs, abs_err);
      c.max_rel = std::max(c.max_rel, rel);
    }
    if (bad) {
      c.ok = false;
      c.mismatches++;
      double excess = std::isnan(abs_err) ? 1e300 : abs_err - tol.atol - tol.rtol * std::fabs(e);
      if (excess > worst_excess) { worst_excess = excess; c.worst = static_cast<int64_t>(i); }
    }
  }
  out << "max abs error " << c.max_abs << ", max rel error " << c.max_rel << " (atol " << tol.atol << ", rtol "
      << tol.rtol << ")";
  if (!c.ok)
    out << "; " << c.mismatches << " of " << actual.size() << " elements out of tolerance, worst at [" << c.worst
        << "]: actual " << static_cast<double>(actual[c.worst]) << " expected " << static_cast<double>(expected[c.worst]);
  c.report = out.str();
  return c;
}

}  // namespace ember::test

// REQUIRE_CLOSE(actual_vector, expected_vector, tolerance): one check with a useful report.
#define REQUIRE_CLOSE(actual, expected, tol)                                     \
  do {                                                                         \
    auto ember_cmp_ = ::ember::test::compare((actual), (expected), (tol));     \
    INFO(ember_cmp_.report);                                                   \
    REQUIRE(ember_cmp_.ok);                                                    \
  } while (0)
