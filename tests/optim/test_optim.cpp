// Optimizers over modules: state follows a moved model, state_dict round trips resume exactly,
// learning-rate schedules.
#include <catch2/catch.hpp>

#include <cmath>

#include "nn/nn.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

using namespace ember;

namespace {

std::shared_ptr<nn::Sequential> tiny_model(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(8, 3));
}

// One training step on a fixed batch.
void train_step(nn::Module& model, optim::Optimizer& opt, int step) {
  Tensor x = Tensor::randn({5, 4}, 100 + step);
  Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 1, 0}, {5});
  nn::CrossEntropyLoss ce;
  opt.zero_grad();
  ce.forward(model.forward(x), y);
  model.backward(ce.backward());
  opt.step();
}

std::vector<float> flat_params(const nn::Module& m) {
  std::vector<float> out;
  for (auto& p : m.parameters())
    for (float v : p->value.to_vector<float>()) out.push_back(v);
  return out;
}

}  // namespace

TEST_CASE("SGD and AdamW state follows the model when it moves after the optimizer was built", "[optim]") {
  auto model = tiny_model(1);
  optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  train_step(*model, sgd, 0);
  REQUIRE(sgd.state_dict().tensors.size() == 4);
  CHECK(sgd.state_dict().tensors[0].second.device().is_cpu());
  model->to(Device::meta());  // stands in for cuda on a machine without a GPU: a real device move
  sgd.step();                 // PyTorch would fail here with a device mismatch; ember moves the state
  CHECK(sgd.state_dict().tensors[0].second.device().is_meta());

  auto model2 = tiny_model(1);
  optim::AdamW adam(model2->parameters(), {.lr = 0.01});
  train_step(*model2, adam, 0);
  model2->to(Device::meta());
  adam.step();
  for (auto& [name, t] : adam.state_dict().tensors) CHECK(t.device().is_meta());
}

TEST_CASE("Optimizer state_dict round trips give an exact resume", "[optim]") {
  for (int kind = 0; kind < 2; ++kind) {
    INFO((kind == 0 ? "SGD" : "AdamW"));
    auto make = [&](nn::Module& m) -> std::unique_ptr<optim::Optimizer> {
      if (kind == 0) return std::make_unique<optim::SGD>(m.parameters(), ops::SgdOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
      return std::make_unique<optim::AdamW>(m.parameters(), ops::AdamWOptions{.lr = 0.01});
    };
    auto straight = tiny_model(7);
    auto opt_a = make(*straight);
    for (int s = 0; s < 4; ++s) train_step(*straight, *opt_a, s);

    auto first = tiny_model(7);
    auto opt_b = make(*first);
    for (int s = 0; s < 2; ++s) train_step(*first, *opt_b, s);
    optim::OptimizerState saved = opt_b->state_dict();
    // "Resume": a fresh model with the saved weights and a fresh optimizer loaded from the state.
    auto resumed = tiny_model(99);
    auto src = first->parameters(), dst = resumed->parameters();
    for (size_t i = 0; i < src.size(); ++i) dst[i]->value.copy_from(src[i]->value);
    auto opt_c = make(*resumed);
    opt_c->load_state_dict(saved);
    for (int s = 2; s < 4; ++s) train_step(*resumed, *opt_c, s);
    CHECK(flat_params(*resumed) == flat_params(*straight));  // bit-identical
  }
}

TEST_CASE("load_state_dict rejects state that does not fit and leaves the optimizer unchanged", "[optim]") {
  auto model = tiny_model(2);
  optim::AdamW adam(model->parameters(), {.lr = 0.01});
  optim::OptimizerState bad;
  bad.scalars["lr"] = 0.5;
  bad.tensors.emplace_back("0.exp_avg", Tensor::zeros({3, 3}));
  bad.tensors.emplace_back("0.exp_avg_sq", Tensor::zeros({3, 3}));
  bad.scalars["0.step"] = 1;
  CHECK_THROWS_AS(adam.load_state_dict(bad), FormatError);
  CHECK(adam.lr() == 0.01);
  optim::OptimizerState missing;
  CHECK_THROWS_WITH(adam.load_state_dict(missing), Catch::Contains("no scalar 'lr'"));
}

TEST_CASE("Optimizer options are validated", "[optim]") {
  auto model = tiny_model(3);
  CHECK_THROWS_AS(optim::SGD(model->parameters(), {.lr = -1}), ValueError);
  CHECK_THROWS_AS(optim::SGD(model->parameters(), {.lr = 0.1, .momentum = 0, .nesterov = true}), ValueError);
  CHECK_THROWS_AS(optim::AdamW(model->parameters(), {.lr = 0.1, .beta1 = 1.0}), ValueError);
}

TEST_CASE("Learning-rate schedules", "[optim]") {
  optim::ConstantLr c(0.3);
  CHECK(c.lr_at(0) == 0.3);
  CHECK(c.lr_at(1000) == 0.3);
  optim::StepLr s(1.0, 10, 0.5);
  CHECK(s.lr_at(9) == 1.0);
  CHECK(s.lr_at(10) == 0.5);
  CHECK(s.lr_at(25) == 0.25);
  optim::CosineLr cos(0.1, 110, 10, 0.0);
  CHECK(cos.lr_at(0) == Approx(0.01));
  CHECK(cos.lr_at(9) == Approx(0.1));
  CHECK(cos.lr_at(10) == Approx(0.1));
  CHECK(cos.lr_at(60) == Approx(0.05));
  CHECK(cos.lr_at(110) == Approx(0.0).margin(1e-15));
  CHECK(cos.lr_at(500) == Approx(0.0).margin(1e-15));
  CHECK_THROWS_AS(optim::CosineLr(0.1, 10, 10), ValueError);
  optim::LinearLr linear(0.1, 110, 10);
  CHECK(linear.lr_at(0) == Approx(0.01));
  CHECK(linear.lr_at(10) == Approx(0.1));
  CHECK(linear.lr_at(60) == Approx(0.05));
  CHECK(linear.lr_at(110) == 0.0);
  CHECK(linear.lr_at(500) == 0.0);
  CHECK_THROWS_AS(optim::LinearLr(0.1, 10, 0), ValueError);
  CHECK_THROWS_AS(optim::StepLr(0.1, 0, 0.5), ValueError);
}
