// The host kernels cut into chunks on the pool: the same bits at 1, 2 and 3 threads, and right across chunk edges.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "kernels/guard.h"
#include "kernels/optim.h"
#include "support/data.h"
#include "support/threads.h"

namespace {

namespace cpu = ember::kernels::cpu;
using ember::test::random_values;
using ember::test::ThreadsScope;

// Three full chunks and a short one, so every chunk edge and the ragged end are crossed.
constexpr int64_t kN = 3 * cpu::kElementwiseGrain + 5;

// Runs `kernel` on fresh copies of `inputs` at 1, 2 and 3 threads and checks every result equals the
// first; returns it.
std::vector<float> same_at_every_thread_count(const std::function<void(std::vector<float>&)>& kernel,
                                              const std::vector<float>& start) {
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    ThreadsScope scope(threads);
    std::vector<float> out = start;
    kernel(out);
    results.push_back(out);
  }
  CHECK(results[1] == results[0]);
  CHECK(results[2] == results[0]);
  return results[0];
}

}  // namespace

TEST_CASE("Elementwise kernels: every element across chunk edges, the same at any thread count", "[kernels]") {
  const auto a = random_values<float>(kN, 1, -1, 1), b = random_values<float>(kN, 2, -1, 1);
  const auto nan = ember::test::nans<float>(kN);
  struct Case {
    const char* name;
    std::function<void(std::vector<float>&)> run;
    std::function<float(size_t)> expected;
  };
  const std::vector<Case> cases = {
      {"fill", [&](auto& o) { cpu::fill<float>(o.data(), kN, 2.5f); }, [](size_t) { return 2.5f; }},
      {"add", [&](auto& o) { cpu::add<float>(a.data(), b.data(), o.data(), kN); }, [&](size_t i) { return a[i] + b[i]; }},
      {"sub", [&](auto& o) { cpu::sub<float>(a.data(), b.data(), o.data(), kN); }, [&](size_t i) { return a[i] - b[i]; }},
      {"mul", [&](auto& o) { cpu::mul<float>(a.data(), b.data(), o.data(), kN); }, [&](size_t i) { return a[i] * b[i]; }},
      {"scale", [&](auto& o) { cpu::scale<float>(a.data(), 3.f, o.data(), kN); }, [&](size_t i) { return 3.f * a[i]; }},
      {"relu", [&](auto& o) { cpu::relu<float>(a.data(), o.data(), kN); },
       [&](size_t i) { return a[i] > 0 ? a[i] : 0.f; }},
      {"relu_backward", [&](auto& o) { cpu::relu_backward<float>(b.data(), a.data(), o.data(), kN); },
       [&](size_t i) { return a[i] > 0 ? b[i] : 0.f; }},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::vector<float> out = same_at_every_thread_count(c.run, nan);
    int64_t wrong = 0;
    for (size_t i = 0; i < out.size(); ++i) wrong += out[i] != c.expected(i);
    CHECK(wrong == 0);
  }
  INFO("axpy");
  const std::vector<float> y = same_at_every_thread_count([&](auto& o) { cpu::axpy<float>(0.5f, a.data(), o.data(), kN); }, b);
  int64_t wrong = 0;
  for (size_t i = 0; i < y.size(); ++i) wrong += y[i] != b[i] + 0.5f * a[i];
  CHECK(wrong == 0);
}

TEST_CASE("add_bias: rows cut into chunks, the same at any thread count", "[kernels]") {
  const int64_t rows = 700, cols = 130;  // 91,000 elements: several chunks of whole rows
  const auto x = random_values<float>(rows * cols, 3, -1, 1), bias = random_values<float>(cols, 4, -1, 1);
  const std::vector<float> out = same_at_every_thread_count(
      [&](auto& o) { cpu::add_bias<float>(x.data(), bias.data(), o.data(), rows, cols); }, ember::test::nans<float>(rows * cols));
  int64_t wrong = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) wrong += out[size_t(r * cols + c)] != x[size_t(r * cols + c)] + bias[size_t(c)];
  CHECK(wrong == 0);
}

TEST_CASE("SGD and AdamW updates: the same bits at any thread count, and each element updated once", "[kernels]") {
  const auto param = random_values<float>(kN, 5, -1, 1), grad = random_values<float>(kN, 6, -1, 1);
  const auto buf = random_values<float>(kN, 7, -1, 1);
  for (bool first : {true, false}) {
    INFO("SGD, first step " << first);
    ember::kernels::SgdParams<float> p{0.1f, 0.9f, 0.f, 1e-4f, true, first};
    // param and momentum in one vector so both outputs are compared.
    std::vector<float> start = param;
    start.insert(start.end(), buf.begin(), buf.end());
    const std::vector<float> out = same_at_every_thread_count(
        [&](auto& o) { cpu::sgd_step<float>(o.data(), grad.data(), o.data() + kN, kN, p, nullptr); }, start);
    int64_t wrong = 0;
    for (size_t i = 0; i < size_t(kN); ++i) {
      const float g = grad[i] + p.weight_decay * param[i];
      const float m = first ? g : p.momentum * buf[i] + g;
      wrong += out[size_t(kN) + i] != m || out[i] != param[i] - p.lr * (g + p.momentum * m);
    }
    CHECK(wrong == 0);
  }
  INFO("AdamW");
  ember::kernels::AdamWParams<float> p{1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, 3};
  std::vector<float> start = param;
  start.insert(start.end(), buf.begin(), buf.end());
  start.insert(start.end(), kN, 0.25f);
  const std::vector<float> out = same_at_every_thread_count(
      [&](auto& o) { cpu::adamw_step<float>(o.data(), grad.data(), o.data() + kN, o.data() + 2 * kN, kN, p, nullptr); },
      start);
  // The update rule of kernels/cpu/optim.cpp, element by element in the same order of operations.
  const auto s = ember::kernels::adamw_scalars(p, 3);
  int64_t wrong = 0;
  for (size_t i = 0; i < size_t(kN); ++i) {
    const float m = s.beta1 * buf[i] + s.one_minus_beta1 * grad[i];
    const float v = s.beta2 * 0.25f + s.one_minus_beta2 * grad[i] * grad[i];
    const float denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    wrong += out[size_t(kN) + i] != m || out[size_t(2 * kN) + i] != v || out[i] != param[i] * s.decay - s.step_size * m / denom;
  }
  CHECK(wrong == 0);
}

TEST_CASE("Guard: a NaN or Inf in any chunk of a tensor is found at any thread count", "[kernels]") {
  std::vector<float> clean = random_values<float>(kN, 8, -1, 1), small = random_values<float>(10, 9, -1, 1);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int threads : {1, 2, 3}) {
    ThreadsScope scope(threads);
    for (int64_t at : {int64_t{0}, cpu::kElementwiseGrain - 1, cpu::kElementwiseGrain, 2 * cpu::kElementwiseGrain + 7,
                       kN - 1, int64_t{-1}}) {
      std::vector<float> x = clean;
      if (at >= 0) x[size_t(at)] = at % 2 ? nan : inf;
      ember::kernels::GuardTensors<float> list{};
      list.count = 2;
      list.data[0] = small.data(), list.numel[0] = 10;
      list.data[1] = x.data(), list.numel[1] = kN;
      ember::kernels::GuardState state{};
      ember::kernels::GuardReport report{};
      cpu::check_finite<float>(list, 1, true, &state, &report);
      INFO("threads " << threads << ", non-finite at " << at);
      CHECK(report.first_mask == (at >= 0 ? ember::kernels::guard_bit(1) : 0));
      CHECK(state.skip == (at >= 0 ? 1 : 0));
    }
  }
}
