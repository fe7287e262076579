// Finite-difference gradient check (DESIGN.md): central differences with eps 1e-6 in float64,
// passing when |analytic - numeric| <= 1e-5 + 1e-3 * |numeric| for every element.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <sstream>
#include <vector>

#include "core/ops.h"
#include "nn/module.h"

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

namespace ember::test {

// f(x) = sum(m(x) * R) checked against m.backward(R) for the input (unless `input` is false: a module whose input
// is data) and every parameter, in float64.
inline void gradcheck_module(nn::Module& m, const Tensor& x, bool input = true) {
  m.zero_grad();
  Tensor y = m.forward(x);
  const Tensor r = Tensor::randn(y.shape(), 17, DType::F64);
  const Tensor dx = m.backward(r);
  auto f_of = [&](Tensor& target) {
    return [&m, &target, &x, &r](const std::vector<double>& v) {
      Tensor saved = target.clone();
      target.copy_from(Tensor::from_vector(v, target.shape()));
      const double s = ops::sum(ops::mul(m.forward(x), r)).item<double>();
      target.copy_from(saved);
      return s;
    };
  };
  Tensor x_copy = x;
  if (input) REQUIRE_GRADCHECK(f_of(x_copy), x.to_vector<double>(), dx.to_vector<double>());
  for (auto& [name, p] : m.named_parameters()) {
    INFO(name);
    REQUIRE_GRADCHECK(f_of(p->value), p->value.to_vector<double>(), p->grad.to_vector<double>());
  }
}

}  // namespace ember::test
