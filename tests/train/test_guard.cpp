// The non-finite guard through the Tensor API: a skipped step is as if it never happened (SGD and AdamW,
// first step included, across a state_dict resume), stop mode freezes the parameters, bad arguments throw.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

#include "core/guard.h"
#include "nn/nn.h"
#include "optim/optimizer.h"

using namespace ember;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<nn::ParameterPtr> make_params() {
  std::vector<nn::ParameterPtr> ps;
  for (int64_t n : {7, 33}) {
    auto p = std::make_shared<nn::Parameter>();
    p->value = Tensor::randn({n}, 10 + static_cast<uint64_t>(n));
    p->grad = Tensor::zeros({n});
    ps.push_back(p);
  }
  return ps;
}

// The gradient of parameter `i` at step `s` (1-based); `poison` puts a NaN/Inf into it.
void set_grads(const std::vector<nn::ParameterPtr>& ps, int s, bool poison) {
  for (size_t i = 0; i < ps.size(); ++i) {
    Tensor g = Tensor::randn(ps[i]->value.shape(), 1000 + 10 * static_cast<uint64_t>(s) + i);
    if (poison && i == 1) {
      std::vector<float> v = g.to_vector<float>();
      v[5] = (s % 2) ? kNaN : -kInf;
      g = Tensor::from_vector(v, g.shape());
    }
    ps[i]->grad.copy_from(g);
  }
}

std::vector<Tensor> grads_of(const std::vector<nn::ParameterPtr>& ps) {
  std::vector<Tensor> out;
  for (const auto& p : ps) out.push_back(p->grad);
  return out;
}

bool bitwise_same(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<nn::ParameterPtr>)>;

void require_same(const std::vector<nn::ParameterPtr>& a, const std::vector<nn::ParameterPtr>& b,
                  const optim::Optimizer& oa, const optim::Optimizer& ob) {
  for (size_t i = 0; i < a.size(); ++i) CHECK(bitwise_same(a[i]->value, b[i]->value));
  optim::OptimizerState sa = oa.state_dict(), sb = ob.state_dict();
  CHECK(sa.scalars == sb.scalars);  // AdamW's step counts leave the skipped steps out
  REQUIRE(sa.tensors.size() == sb.tensors.size());
  for (size_t i = 0; i < sa.tensors.size(); ++i) {
    INFO(sa.tensors[i].first);
    CHECK(sa.tensors[i].first == sb.tensors[i].first);
    CHECK(bitwise_same(sa.tensors[i].second, sb.tensors[i].second));
  }
}

std::vector<std::pair<const char*, MakeOpt>> optimizers() {
  return {
      {"SGD, Nesterov momentum and weight decay",
       [](std::vector<nn::ParameterPtr> ps) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::SGD>(std::move(ps), ops::SgdOptions{.lr = 0.1, .momentum = 0.9,
                                                                            .weight_decay = 1e-3, .nesterov = true});
       }},
      {"SGD, plain", [](std::vector<nn::ParameterPtr> ps) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::SGD>(std::move(ps), ops::SgdOptions{.lr = 0.05});
       }},
      {"AdamW", [](std::vector<nn::ParameterPtr> ps) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::AdamW>(std::move(ps), ops::AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
       }},
  };
}

}  // namespace

TEST_CASE("A step the guard skips is as if it never happened (SGD and AdamW, the first step too)", "[train]") {
  for (const auto& [name, make] : optimizers()) {
    for (const std::vector<int>& bad : {std::vector<int>{3}, std::vector<int>{1}, std::vector<int>{1, 2, 5}}) {
      INFO(name << ", non-finite steps " << bad.front() << (bad.size() > 1 ? " and more" : ""));
      auto guarded = make_params(), plain = make_params();
      auto og = make(guarded), op = make(plain);
      NonFiniteGuard guard(Device::cpu(), NonFiniteGuard::Mode::Skip);
      og->set_guard(&guard);
      for (int s = 1; s <= 7; ++s) {
        const bool poison = std::find(bad.begin(), bad.end(), s) != bad.end();
        set_grads(guarded, s, poison);
        guard.check(s, grads_of(guarded));
        og->step();
        if (!poison) {  // the reference never sees the bad steps
          set_grads(plain, s, false);
          op->step();
        }
      }
      require_same(guarded, plain, *og, *op);
      const kernels::GuardReport r = guard.report();
      CHECK(r.first_step == bad.front());
      CHECK(r.first_mask == kernels::guard_bit(1));  // the second tensor of the list
      CHECK(r.last_step == bad.back());
      CHECK(r.count == static_cast<int64_t>(bad.size()));
    }
  }
}

TEST_CASE("After a skipped step, a state_dict resume continues exactly like the run itself", "[train]") {
  for (const auto& [name, make] : optimizers()) {
    INFO(name);
    auto run = make_params();
    auto opt = make(run);
    NonFiniteGuard guard(Device::cpu(), NonFiniteGuard::Mode::Skip);
    opt->set_guard(&guard);
    for (int s = 1; s <= 4; ++s) {
      set_grads(run, s, s == 2);
      guard.check(s, grads_of(run));
      opt->step();
    }
    // Resume: parameters and optimizer state into fresh objects with a fresh guard.
    auto resumed = make_params();
    for (size_t i = 0; i < run.size(); ++i) resumed[i]->value.copy_from(run[i]->value);
    auto opt2 = make(resumed);
    opt2->load_state_dict(opt->state_dict());
    NonFiniteGuard guard2(Device::cpu(), NonFiniteGuard::Mode::Skip);
    opt2->set_guard(&guard2);
    for (int s = 5; s <= 7; ++s) {
      set_grads(run, s, false);
      guard.check(s, grads_of(run));
      opt->step();
      set_grads(resumed, s, false);
      guard2.check(s, grads_of(resumed));
      opt2->step();
    }
    require_same(run, resumed, *opt, *opt2);
  }
}

TEST_CASE("In stop mode the first non-finite step freezes the parameters until the host stops", "[train]") {
  auto ps = make_params();
  optim::SGD sgd(ps, {.lr = 0.1, .momentum = 0.9});
  NonFiniteGuard guard(Device::cpu(), NonFiniteGuard::Mode::Stop);
  sgd.set_guard(&guard);
  std::vector<Tensor> before;
  for (int s = 1; s <= 5; ++s) {
    if (s == 3)
      for (const auto& p : ps) before.push_back(p->value.clone());
    set_grads(ps, s, s == 3);
    Tensor loss = Tensor::full({}, s == 3 ? 1.0 : 2.0);
    guard.check(s, {loss, ps[0]->grad, ps[1]->grad});
    sgd.step();
    CHECK(guard.first_bad_step() == (s < 3 ? 0 : 3));  // exact at once on the CPU
  }
  for (size_t i = 0; i < ps.size(); ++i) CHECK(bitwise_same(ps[i]->value, before[i]));  // steps 3, 4, 5 not applied
  const kernels::GuardReport r = guard.report();
  CHECK(r.first_mask == kernels::guard_bit(2));
  CHECK(r.count == 1);  // only step 3 was non-finite; 4 and 5 were skipped because the run is stopping
}

TEST_CASE("The guard flags a non-finite loss alone, and names each tensor by its bit", "[train]") {
  NonFiniteGuard guard(Device::cpu(), NonFiniteGuard::Mode::Skip);
  Tensor fine = Tensor::ones({3}), loss = Tensor::full({}, kInf);
  guard.check(1, {loss, fine, fine});
  guard.check(2, {fine, Tensor::full({2}, kNaN), fine, Tensor::full({1}, -kInf)});
  guard.check(3, {fine, fine});
  guard.check(4, {});
  const kernels::GuardReport r = guard.report();
  CHECK(r.first_step == 1);
  CHECK(r.first_mask == kernels::guard_bit(0));
  CHECK(r.last_step == 2);
  CHECK(r.count == 2);
  CHECK(guard.state()->skip == 0);  // step 4 (an empty list) was clean
  CHECK(guard.state()->skipped == 2);
}

TEST_CASE("The guard rejects what it cannot check, with the reason", "[train]") {
  NonFiniteGuard guard(Device::cpu(), NonFiniteGuard::Mode::Stop);
  Tensor f32 = Tensor::ones({2});
  CHECK_THROWS_AS(guard.check(1, {f32, Tensor::ones({2}, DType::F64)}), DTypeError);
  CHECK_THROWS_AS(guard.check(1, {Tensor::ones({2}, DType::I64)}), DTypeError);
  CHECK_THROWS_AS(guard.check(1, {f32, Tensor::ones({2}, DType::F32, Device::meta())}), DeviceMismatchError);
  CHECK_THROWS_AS(guard.check(1, {f32, Tensor()}), Error);
  CHECK_THROWS_AS(guard.check(1, {Tensor::ones({2, 3}).t()}), ValueError);  // strided view
  CHECK_THROWS_WITH(guard.check(1, std::vector<Tensor>(65, f32)), Catch::Contains("at most 64"));
  CHECK_THROWS_WITH(guard.check(0, {f32}), Catch::Contains("1-based"));
  CHECK_THROWS_AS(NonFiniteGuard(Device::meta(), NonFiniteGuard::Mode::Skip), ValueError);
  optim::SGD damped(make_params(), {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  CHECK_THROWS_WITH(damped.set_guard(&guard), Catch::Contains("dampening = 0"));
  CHECK_NOTHROW(damped.set_guard(nullptr));
}
