// Registry rows of softmax and cross-entropy (kernels/softmax_xent.h), the optimizer updates (kernels/optim.h) and
// the non-finite guard (kernels/guard.h).
#include <cmath>
#include <limits>

#include "core/guard.h"
#include "core/ops/registry_cases.h"

namespace ember::ops::registry {

namespace {

constexpr int64_t kClasses = 10;        // the MLP's logits: a lane group per row on CUDA
constexpr int64_t kWideClasses = 1531;  // past the 1024 classes a lane group holds: a block per row

// exp, log and division: the twins may differ by a few ulps.
double softmax_tolerance(DType dtype) { return tolerance(dtype, 1e-5, 1e-13); }

Tensor logits(const Matrix& m, uint64_t seed, DType dtype) {
  return smooth_values({m.rows, m.cols}, seed, dtype, -4, 4);
}

template <bool kLog, int64_t kWidth>
OpCase make_softmax(int64_t n, DType dtype) {
  const Matrix m = matrix(n, kWidth);
  OpCase c = case_for({m.rows, m.cols});
  c.inputs = {logits(m, 41, dtype)};
  c.run = [](Device, Args& a) { return Outputs{kLog ? ops::log_softmax(a[0]) : ops::softmax(a[0])}; };
  c.tolerance = softmax_tolerance(dtype);
  return c;
}

// y is the forward's output, made on the host.
template <bool kLog>
OpCase make_softmax_backward(int64_t n, DType dtype) {
  const Matrix m = matrix(n, kClasses);
  OpCase c = case_for({m.rows, m.cols});
  Tensor x = logits(m, 42, dtype);
  c.inputs = {kLog ? ops::log_softmax(x) : ops::softmax(x), smooth_values({m.rows, m.cols}, 43, dtype)};
  c.run = [](Device, Args& a) {
    return Outputs{kLog ? ops::log_softmax_backward(a[0], a[1]) : ops::softmax_backward(a[0], a[1])};
  };
  c.tolerance = softmax_tolerance(dtype);
  return c;
}

OpCase make_cross_entropy(int64_t n, DType dtype) {
  const Matrix m = matrix(n, kClasses);
  OpCase c = case_for({m.rows, m.cols});
  c.inputs = {logits(m, 44, dtype), class_labels(m.rows, m.cols, label_dtype(dtype))};
  c.run = [](Device, Args& a) {
    CrossEntropy r = ops::cross_entropy(a[0], a[1]);
    return Outputs{r.loss, r.probs};
  };
  c.tolerance = softmax_tolerance(dtype);
  return c;
}

OpCase make_cross_entropy_backward(int64_t n, DType dtype) {
  const Matrix m = matrix(n, kClasses);
  OpCase c = case_for({m.rows, m.cols});
  c.inputs = {ops::softmax(logits(m, 45, dtype)), class_labels(m.rows, m.cols, label_dtype(dtype))};
  c.run = [](Device, Args& a) { return Outputs{ops::cross_entropy_backward(a[0], a[1], 1.5)}; };
  c.tolerance = tolerance(dtype, 1e-6, 1e-15);
  return c;
}

// Nesterov momentum with weight decay, past the first step: every term of the update runs.
OpCase make_sgd_step(int64_t n, DType dtype) {
  OpCase c = case_for({n});
  c.inputs = {smooth_values({n}, 46, dtype), smooth_values({n}, 47, dtype, -0.1, 0.1),
              smooth_values({n}, 48, dtype, -0.1, 0.1)};
  c.run = [](Device, Args& a) {
    const SgdOptions o{0.01, 0.9, 0, 1e-4, true};
    ops::sgd_step_(a[0], a[1], a[2], o, false);
    return Outputs{a[0], a[2]};
  };
  c.tolerance = tolerance(dtype, 1e-6, 1e-15);  // a GPU fuses multiply-adds
  return c;
}

OpCase make_adamw_step(int64_t n, DType dtype) {
  OpCase c = case_for({n});
  c.inputs = {smooth_values({n}, 49, dtype), smooth_values({n}, 50, dtype, -0.1, 0.1),
              smooth_values({n}, 51, dtype, -0.01, 0.01), smooth_values({n}, 52, dtype, 0, 1e-4)};
  c.run = [](Device, Args& a) {
    ops::adamw_step_(a[0], a[1], a[2], a[3], AdamWOptions{}, 10);
    return Outputs{a[0], a[2], a[3]};
  };
  c.tolerance = tolerance(dtype, 1e-5, 1e-13);  // a square root and a division per element
  return c;
}

// Three checks: a finite step, then two with a non-finite element in b. The report comes back as 4 int64 on the
// cpu: {first_step, first_mask, last_step, count} = {2, 0b10, 3, 2} when both sides find it.
OpCase make_check_finite(int64_t n, DType dtype) {
  OpCase c = case_for({n});
  const int64_t nb = n / 3 + 1;
  Tensor b = smooth_values({nb}, 54, dtype);
  visit_floating(dtype, "check_finite", [&](auto zero) {
    using T = decltype(zero);
    b.data<T>()[nb / 2] = std::numeric_limits<T>::quiet_NaN();
  });
  c.inputs = {smooth_values({n}, 53, dtype), b};
  c.elements = n + nb;
  c.run = [](Device device, Args& a) {
    NonFiniteGuard guard(device, NonFiniteGuard::Mode::Skip);
    guard.check(1, {a[0]});
    guard.check(2, {a[0], a[1]});
    guard.check(3, {a[1], a[0]});
    const kernels::GuardReport r = guard.report();
    const std::vector<int64_t> report = {r.first_step, static_cast<int64_t>(r.first_mask), r.last_step, r.count};
    return Outputs{Tensor::from_vector(report, {4})};
  };
  return c;
}

}  // namespace

std::vector<OpRow> softmax_xent_rows() {
  const char* fam = "softmax_xent";
  return {
      {"softmax", "ops::softmax", fam, "cpu::softmax", "cuda::softmax", kFloating, make_softmax<false, kClasses>},
      {"softmax_wide", "ops::softmax", fam, "cpu::softmax", "cuda::softmax", kFloating,
       make_softmax<false, kWideClasses>},
      {"log_softmax", "ops::log_softmax", fam, "cpu::log_softmax", "cuda::log_softmax", kFloating,
       make_softmax<true, kClasses>},
      {"softmax_backward", "ops::softmax_backward", fam, "cpu::softmax_backward", "cuda::softmax_backward", kFloating,
       make_softmax_backward<false>},
      {"log_softmax_backward", "ops::log_softmax_backward", fam, "cpu::log_softmax_backward",
       "cuda::log_softmax_backward", kFloating, make_softmax_backward<true>},
      {"cross_entropy", "ops::cross_entropy", fam, "cpu::softmax_xent_forward, cpu::sum",
       "cuda::softmax_xent_forward, cuda::sum", kFloating, make_cross_entropy,
       "cross_entropy: fused softmax-cross-entropy forward and the mean, 10 classes (8 bytes per logit + labels)"},
      {"cross_entropy_backward", "ops::cross_entropy_backward", fam, "cpu::softmax_xent_backward",
       "cuda::softmax_xent_backward", kFloating, make_cross_entropy_backward,
       "cross_entropy_backward: probs - onehot(labels), 10 classes (8 bytes per logit + labels)"},
  };
}

std::vector<OpRow> optim_rows() {
  return {
      {"sgd_step", "ops::sgd_step_", "optim", "cpu::sgd_step", "cuda::sgd_step", kFloating, make_sgd_step,
       "sgd_step: SGD, Nesterov momentum and weight decay (20 bytes per parameter)"},
      {"adamw_step", "ops::adamw_step_", "optim", "cpu::adamw_step", "cuda::adamw_step", kFloating, make_adamw_step,
       "adamw_step: AdamW (28 bytes per parameter)"},
  };
}

std::vector<OpRow> guard_rows() {
  return {
      {"check_finite", "NonFiniteGuard::check", "guard", "cpu::check_finite", "cuda::check_finite", kFloating,
       make_check_finite, nullptr, "NonFiniteGuard refuses the meta device: there are no values to check"},
  };
}

}  // namespace ember::ops::registry
