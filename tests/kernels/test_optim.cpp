// CPU SGD / AdamW kernels against hand-derived numbers and a double-precision transcription of torch.optim.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/optim.h"
#include "support/compare.h"

namespace {

using ember::kernels::AdamWParams;
using ember::kernels::SgdParams;
using ember::test::kF32;
using ember::test::kF64;
using ember::test::Tolerance;
namespace cpu = ember::kernels::cpu;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <typename T>
constexpr Tolerance tolerance_for() {
  return sizeof(T) == 4 ? kF32 : kF64;
}

template <typename T>
std::vector<T> cast(const std::vector<double>& x) {
  return std::vector<T>(x.begin(), x.end());
}

std::vector<double> uniform(int64_t n, double lo, double hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> out(static_cast<size_t>(n));
  for (auto& x : out) x = dist(gen);
  return out;
}

// Rounds through T so the double reference starts from exactly the values the kernel sees.
template <typename T>
std::vector<double> through(const std::vector<double>& x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(static_cast<T>(x[i]));
  return out;
}

template <typename T>
void require_finite(const std::vector<T>& x) {
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::isfinite(static_cast<double>(x[i])));
  }
}

// torch.optim.SGD's single-tensor step, transcribed (buf == None <=> !has_buf).
struct SgdConfig {
  const char* name;
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
};

void reference_sgd(std::vector<double>& param, const std::vector<double>& grad, std::vector<double>& buf,
                   bool& has_buf, const SgdConfig& c) {
  for (size_t i = 0; i < param.size(); ++i) {
    double d_p = grad[i];
    if (c.weight_decay != 0) d_p = d_p + c.weight_decay * param[i];
    if (c.momentum != 0) {
      if (!has_buf)
        buf[i] = d_p;
      else
        buf[i] = buf[i] * c.momentum + (1 - c.dampening) * d_p;
      d_p = c.nesterov ? d_p + c.momentum * buf[i] : buf[i];
    }
    param[i] = param[i] - c.lr * d_p;
  }
  if (c.momentum != 0) has_buf = true;
}

// torch.optim.AdamW's single-tensor step, transcribed; step is 1-based.
struct AdamWConfig {
  const char* name;
  double lr, beta1, beta2, eps, weight_decay;
};

void reference_adamw(std::vector<double>& param, const std::vector<double>& grad, std::vector<double>& m,
                     std::vector<double>& v, int64_t step, const AdamWConfig& c) {
  const double bias_correction1 = 1 - std::pow(c.beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(c.beta2, static_cast<double>(step));
  for (size_t i = 0; i < param.size(); ++i) {
    param[i] *= 1 - c.lr * c.weight_decay;
    m[i] = c.beta1 * m[i] + (1 - c.beta1) * grad[i];
    v[i] = c.beta2 * v[i] + (1 - c.beta2) * grad[i] * grad[i];
    const double m_hat = m[i] / bias_correction1;
    const double v_hat = v[i] / bias_correction2;
    param[i] -= c.lr * m_hat / (std::sqrt(v_hat) + c.eps);
  }
}

template <typename T>
SgdParams<T> sgd_params(const SgdConfig& c, bool first_step) {
  return {static_cast<T>(c.lr),           static_cast<T>(c.momentum), static_cast<T>(c.dampening),
          static_cast<T>(c.weight_decay), c.nesterov,                 first_step};
}

template <typename T>
AdamWParams<T> adamw_params(const AdamWConfig& c, int64_t step) {
  return {static_cast<T>(c.lr), static_cast<T>(c.beta1), static_cast<T>(c.beta2), static_cast<T>(c.eps),
          static_cast<T>(c.weight_decay), step};
}

// Hyper-parameters exactly representable in neither float nor double on purpose (0.1, 0.9 ...).
const SgdConfig kSgdConfigs[] = {
    {"plain", 0.1, 0, 0, 0, false},
    {"momentum", 0.05, 0.9, 0, 0, false},
    {"momentum + dampening", 0.05, 0.9, 0.3, 0, false},
    {"nesterov", 0.05, 0.9, 0, 0, true},
    {"weight decay", 0.1, 0, 0, 0.01, false},
    {"momentum + dampening + weight decay", 0.02, 0.8, 0.1, 0.05, false},
    {"nesterov + weight decay", 0.03, 0.5, 0, 0.1, true},
};

const AdamWConfig kAdamWConfigs[] = {
    {"defaults, no decay", 1e-3, 0.9, 0.999, 1e-8, 0},
    {"defaults, torch's decay", 1e-3, 0.9, 0.999, 1e-8, 1e-2},
    {"large lr and decay", 5e-2, 0.8, 0.99, 1e-6, 0.1},
    {"short memory", 1e-2, 0.5, 0.9, 1e-8, 0.05},
};

const int64_t kSizes[] = {1, 3, 7, 33, 1001};

}  // namespace

TEMPLATE_TEST_CASE("sgd_step: hand-derived values", "[kernels]", float, double) {
  using T = TestType;
  const Tolerance tol = tolerance_for<T>();
  // Two steps with p = 1 and g = 0.5 each time, lr = 0.1 throughout.
  auto run = [](SgdConfig c, bool with_buffer) {
    std::vector<T> param{T(1)}, grad{T(0.5)}, buf{T(kNaN)};
    std::vector<double> out;
    for (int step = 0; step < 2; ++step) {
      cpu::sgd_step<T>(param.data(), grad.data(), with_buffer ? buf.data() : nullptr, 1,
                       sgd_params<T>(c, step == 0));
      out.push_back(static_cast<double>(param[0]));
      if (with_buffer) out.push_back(static_cast<double>(buf[0]));
    }
    return out;
  };
  SECTION("plain, no buffer") {
    // p = 1 - 0.1 * 0.5 = 0.95; p = 0.95 - 0.05 = 0.9.
    REQUIRE_CLOSE(run({"", 0.1, 0, 0, 0, false}, false), (std::vector<double>{0.95, 0.9}), tol);
  }
  SECTION("momentum 0.9") {
    // step 1: buf = g = 0.5, p = 1 - 0.1 * 0.5 = 0.95.
    // step 2: buf = 0.9 * 0.5 + 0.5 = 0.95, p = 0.95 - 0.1 * 0.95 = 0.855.
    REQUIRE_CLOSE(run({"", 0.1, 0.9, 0, 0, false}, true), (std::vector<double>{0.95, 0.5, 0.855, 0.95}), tol);
  }
  SECTION("momentum 0.9, dampening 0.5") {
    // step 1: buf = g = 0.5 (no dampening on the first step), p = 0.95.
    // step 2: buf = 0.9 * 0.5 + (1 - 0.5) * 0.5 = 0.7, p = 0.95 - 0.07 = 0.88.
    REQUIRE_CLOSE(run({"", 0.1, 0.9, 0.5, 0, false}, true), (std::vector<double>{0.95, 0.5, 0.88, 0.7}), tol);
  }
  SECTION("nesterov 0.9") {
    // step 1: buf = 0.5, g = 0.5 + 0.9 * 0.5 = 0.95, p = 1 - 0.095 = 0.905.
    // step 2: buf = 0.45 + 0.5 = 0.95, g = 0.5 + 0.9 * 0.95 = 1.355, p = 0.905 - 0.1355 = 0.7695.
    REQUIRE_CLOSE(run({"", 0.1, 0.9, 0, 0, true}, true), (std::vector<double>{0.905, 0.5, 0.7695, 0.95}), tol);
  }
  SECTION("weight decay 0.1, no momentum") {
    // step 1: g = 0.5 + 0.1 * 1 = 0.6, p = 1 - 0.06 = 0.94.
    // step 2: g = 0.5 + 0.094 = 0.594, p = 0.94 - 0.0594 = 0.8806.
    REQUIRE_CLOSE(run({"", 0.1, 0, 0, 0.1, false}, false), (std::vector<double>{0.94, 0.8806}), tol);
  }
  SECTION("weight decay 0.1, momentum 0.9") {
    // step 1: g = 0.6, buf = 0.6, p = 0.94.
    // step 2: g = 0.594, buf = 0.54 + 0.594 = 1.134, p = 0.94 - 0.1134 = 0.8266.
    REQUIRE_CLOSE(run({"", 0.1, 0.9, 0, 0.1, false}, true), (std::vector<double>{0.94, 0.6, 0.8266, 1.134}), tol);
  }
}

TEMPLATE_TEST_CASE("adamw_step: hand-derived values pin the bias corrections", "[kernels]", float, double) {
  using T = TestType;
  // p = 1, g = 0.5 twice; lr 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.01.
  // step 1: p = 1 * (1 - 0.1 * 0.01) = 0.999; m = 0.1 * 0.5 = 0.05; v = 0.001 * 0.25 = 0.00025;
  //   m_hat = 0.05 / (1 - 0.9) = 0.5; v_hat = 0.00025 / (1 - 0.999) = 0.25; sqrt(v_hat) = 0.5;
  //   p = 0.999 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.999 - (0.1 - 2e-9) = 0.899000002 (error ~4e-17).
  // step 2: p = 0.899000002 * 0.999 = 0.898101001998; m = 0.045 + 0.05 = 0.095;
  //   v = 0.999 * 0.00025 + 0.00025 = 0.00049975; m_hat = 0.095 / 0.19 = 0.5;
  //   v_hat = 0.00049975 / 0.001999 = 0.25; p = 0.898101001998 - (0.1 - 2e-9) = 0.798101003998.
  // Without the bias corrections step 1 would move p by 0.1 * 0.05 / sqrt(0.00025) = 0.316 instead.
  std::vector<T> param{T(1)}, grad{T(0.5)}, m{T(0)}, v{T(0)};
  const AdamWConfig c{"", 0.1, 0.9, 0.999, 1e-8, 0.01};
  std::vector<double> out;
  for (int64_t step = 1; step <= 2; ++step) {
    cpu::adamw_step<T>(param.data(), grad.data(), m.data(), v.data(), 1, adamw_params<T>(c, step));
    out.insert(out.end(), {static_cast<double>(param[0]), static_cast<double>(m[0]), static_cast<double>(v[0])});
  }
  REQUIRE_CLOSE(out, (std::vector<double>{0.899000002, 0.05, 0.00025, 0.798101003998, 0.095, 0.00049975}),
                tolerance_for<T>());
}

TEMPLATE_TEST_CASE("sgd_step matches torch.optim.SGD over several steps", "[kernels]", float, double) {
  using T = TestType;
  for (const SgdConfig& c : kSgdConfigs) {
    for (int64_t n : kSizes) {
      INFO(c.name << ", n = " << n);
      std::vector<double> ref_param = through<T>(uniform(n, -1, 1, 7 + static_cast<uint32_t>(n)));
      std::vector<double> ref_buf(static_cast<size_t>(n), kNaN);
      bool has_buf = false;
      std::vector<T> param = cast<T>(ref_param), buf(static_cast<size_t>(n), T(kNaN));
      for (int step = 0; step < 5; ++step) {
        const std::vector<double> grad = through<T>(uniform(n, -2, 2, 100 + static_cast<uint32_t>(step)));
        const std::vector<T> grad_t = cast<T>(grad);
        cpu::sgd_step<T>(param.data(), grad_t.data(), c.momentum != 0 ? buf.data() : nullptr, n,
                         sgd_params<T>(c, step == 0));
        reference_sgd(ref_param, grad, ref_buf, has_buf, c);
      }
      require_finite(param);
      REQUIRE_CLOSE(param, ref_param, tolerance_for<T>());
      if (c.momentum != 0) REQUIRE_CLOSE(buf, ref_buf, tolerance_for<T>());
    }
  }
}

TEMPLATE_TEST_CASE("sgd_step: first_step starts the buffer at the gradient and never reads it", "[kernels]", float,
                   double) {
  using T = TestType;
  const int64_t n = 5;
  std::vector<T> param{1, -2, 3, 0.5, 0}, grad{0.5, 0.25, -1, 2, 0}, buf(n, T(kNaN));
  // Dampening 0.5 and weight decay 0.1: the first buffer is g + wd * p, undamped.
  const SgdConfig c{"", 0.1, 0.9, 0.5, 0.1, false};
  std::vector<double> expected_buf(n), expected_param(n);
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(grad[i]) + 0.1 * static_cast<double>(param[i]);
    expected_buf[i] = g;
    expected_param[i] = static_cast<double>(param[i]) - 0.1 * g;
  }
  cpu::sgd_step<T>(param.data(), grad.data(), buf.data(), n, sgd_params<T>(c, true));
  REQUIRE_CLOSE(buf, expected_buf, tolerance_for<T>());
  REQUIRE_CLOSE(param, expected_param, tolerance_for<T>());

  SECTION("a later step with first_step = false uses the dampened update") {
    for (int64_t i = 0; i < n; ++i) {
      const double g = static_cast<double>(grad[i]) + 0.1 * expected_param[i];
      expected_buf[i] = 0.9 * expected_buf[i] + 0.5 * g;
      expected_param[i] -= 0.1 * expected_buf[i];
    }
    cpu::sgd_step<T>(param.data(), grad.data(), buf.data(), n, sgd_params<T>(c, false));
    REQUIRE_CLOSE(buf, expected_buf, tolerance_for<T>());
    REQUIRE_CLOSE(param, expected_param, tolerance_for<T>());
  }
}

TEMPLATE_TEST_CASE("adamw_step matches torch.optim.AdamW over several steps", "[kernels]", float, double) {
  using T = TestType;
  for (const AdamWConfig& c : kAdamWConfigs) {
    for (int64_t n : kSizes) {
      // first_step 1 is a fresh optimizer; 4 resumes mid-run from state carried in m and v.
      for (int64_t first_step : {int64_t{1}, int64_t{4}}) {
        INFO(c.name << ", n = " << n << ", first step " << first_step);
        std::vector<double> ref_param = through<T>(uniform(n, -1, 1, 11 + static_cast<uint32_t>(n)));
        std::vector<double> ref_m(static_cast<size_t>(n), 0), ref_v(static_cast<size_t>(n), 0);
        if (first_step > 1) {
          ref_m = through<T>(uniform(n, -0.5, 0.5, 3));
          ref_v = through<T>(uniform(n, 0, 0.5, 4));
        }
        std::vector<T> param = cast<T>(ref_param), m = cast<T>(ref_m), v = cast<T>(ref_v);
        for (int64_t step = first_step; step < first_step + 6; ++step) {
          const std::vector<double> grad = through<T>(uniform(n, -2, 2, 200 + static_cast<uint32_t>(step)));
          const std::vector<T> grad_t = cast<T>(grad);
          cpu::adamw_step<T>(param.data(), grad_t.data(), m.data(), v.data(), n, adamw_params<T>(c, step));
          reference_adamw(ref_param, grad, ref_m, ref_v, step, c);
        }
        require_finite(param);
        REQUIRE_CLOSE(param, ref_param, tolerance_for<T>());
        REQUIRE_CLOSE(m, ref_m, tolerance_for<T>());
        REQUIRE_CLOSE(v, ref_v, tolerance_for<T>());
      }
    }
  }
}

TEMPLATE_TEST_CASE("adamw_step: a zero gradient only decays the parameter, no NaN from 0 / 0", "[kernels]", float,
                   double) {
  using T = TestType;
  const int64_t n = 3;
  std::vector<T> param{1, -2, 0.5}, grad(n, T(0)), m(n, T(0)), v(n, T(0));
  const AdamWConfig c{"", 0.1, 0.9, 0.999, 1e-8, 0.5};
  for (int64_t step = 1; step <= 3; ++step)
    cpu::adamw_step<T>(param.data(), grad.data(), m.data(), v.data(), n, adamw_params<T>(c, step));
  // m = v = 0 so the Adam term is 0 / eps = 0; each step multiplies p by 1 - 0.1 * 0.5 = 0.95.
  const double f = 0.95 * 0.95 * 0.95;
  REQUIRE_CLOSE(param, (std::vector<double>{f, -2 * f, 0.5 * f}), tolerance_for<T>());
  REQUIRE_CLOSE(m, (std::vector<double>(n, 0)), ember::test::kExact);
  REQUIRE_CLOSE(v, (std::vector<double>(n, 0)), ember::test::kExact);
}

TEST_CASE("optimizer kernels: n = 0 touches nothing", "[kernels]") {
  cpu::sgd_step<float>(nullptr, nullptr, nullptr, 0, {0.1f, 0.9f, 0, 0, false, true});
  cpu::adamw_step<float>(nullptr, nullptr, nullptr, nullptr, 0, {1e-3f, 0.9f, 0.999f, 1e-8f, 0, 1});
  SUCCEED("no pointer was dereferenced");
}

TEST_CASE("optimizer kernels reject invalid hyper-parameters", "[kernels]") {
  std::vector<double> param{1}, grad{0.5}, buf{0}, m{0}, v{0};
  SECTION("nesterov with dampening") {
    REQUIRE_THROWS_AS(cpu::sgd_step<double>(param.data(), grad.data(), buf.data(), 1, {0.1, 0.9, 0.1, 0, true, true}),
                      ember::ValueError);
  }
  SECTION("nesterov without momentum") {
    REQUIRE_THROWS_AS(cpu::sgd_step<double>(param.data(), grad.data(), buf.data(), 1, {0.1, 0, 0, 0, true, true}),
                      ember::ValueError);
  }
  SECTION("momentum without a buffer is a caller bug") {
    REQUIRE_THROWS_AS(cpu::sgd_step<double>(param.data(), grad.data(), nullptr, 1, {0.1, 0.9, 0, 0, false, true}),
                      ember::InternalError);
  }
  SECTION("AdamW step 0 (steps are 1-based)") {
    REQUIRE_THROWS_AS(
        cpu::adamw_step<double>(param.data(), grad.data(), m.data(), v.data(), 1, {1e-3, 0.9, 0.999, 1e-8, 0, 0}),
        ember::ValueError);
  }
  REQUIRE(param[0] == 1.0);  // a rejected call leaves the parameter alone
}
