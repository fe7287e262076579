// Finite-difference gradient check (DESIGN.md): central differences with eps 1e-6 in float64,
// passing when |analytic - numeric| <= 1e-5 + 1e-3 * |numeric| for every element.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <sstream>
#include <vector>

namespace ember::test {

struct GradCheck {
  bool ok = true;
  double max_abs = 0;
  std::string report;
};

// f maps the inputs to a scalar; `analytic` is the gradient of f at x to be checked. `indices`
// limits the check to those elements (empty: all), for inputs too large to perturb one by one.
inline GradCheck gradcheck(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x,
                           const std::vector<double>& analytic, const std::vector<size_t>& indices = {},
                           double eps = 1e-6) {
  GradCheck g;
  std::ostringstream out;
  if (analytic.size() != x.size()) {
    g.ok = false;
    out << "analytic gradient has " << analytic.size() << " elements, input has " << x.size();
    g.report = out.str();
    return g;
  }
  std::vector<size_t> all;
  if (indices.empty())
    for (size_t i = 0; i < x.size(); ++i) all.push_back(i);
  for (size_t i : indices.empty() ? all : indices) {
    double saved = x[i];
    x[i] = saved + eps;
    double up = f(x);
    x[i] = saved - eps;
    double down = f(x);
    x[i] = saved;
    double numeric = (up - down) / (2 * eps);
    double err = std::fabs(analytic[i] - numeric);
    g.max_abs = std::max(g.max_abs, err);
    if (!(err <= 1e-5 + 1e-3 * std::fabs(numeric))) {
      if (g.ok) out << "first mismatch at [" << i << "]: analytic " << analytic[i] << " numeric " << numeric << "; ";
      g.ok = false;
    }
  }
  out << "max |analytic - numeric| = " << g.max_abs << " over " << (indices.empty() ? x.size() : indices.size())
      << " elements";
  g.report = out.str();
  return g;
}

}  // namespace ember::test

// REQUIRE_GRADCHECK(f, x, analytic[, indices])
#define REQUIRE_GRADCHECK(f, x, ...)                                         \
  do {                                                                       \
    auto ember_gc_ = ::ember::test::gradcheck((f), (x), __VA_ARGS__);        \
    INFO(ember_gc_.report);                                                  \
    REQUIRE(ember_gc_.ok);                                                   \
  } while (0)
