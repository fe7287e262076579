// nn::Module: registration and names, the gradient contract, device moves in place, input checks,
// layer init, dropout, summary on meta tensors.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/ops.h"
#include "core/transfer_ledger.h"
#include "nn/nn.h"

using namespace ember;
using namespace ember::nn;

namespace {

std::shared_ptr<Sequential> mlp(int64_t in, int64_t hidden, int64_t out, DType dtype = DType::F32,
                                 Device device = Device::cpu()) {
  return std::make_shared<Sequential>(std::make_shared<Linear>(in, hidden, true, dtype, device),
                                                 std::make_shared<ReLU>(),
                                                 std::make_shared<Linear>(hidden, out, true, dtype, device));
}

// A module that registers what the test asks it to.
struct Custom : Module {
  Tensor forward(const Tensor& x) override { return x; }
  Tensor backward(const Tensor& g) override { return g; }
  std::string type_name() const override { return "Custom"; }
  using Module::register_buffer;
  using Module::register_module;
  using Module::register_parameter;
};

}  // namespace

TEST_CASE("Sequential names parameters as PyTorch does, in registration order", "[nn]") {
  auto model = mlp(784, 128, 10);
  auto named = model->named_parameters();
  REQUIRE(named.size() == 4);
  CHECK(named[0].first == "0.weight");
  CHECK(named[0].second->value.shape() == Shape{128, 784});
  CHECK(named[1].first == "0.bias");
  CHECK(named[1].second->value.shape() == Shape{128});
  CHECK(named[2].first == "2.weight");
  CHECK(named[2].second->value.shape() == Shape{10, 128});
  CHECK(named[3].first == "2.bias");
  CHECK(model->num_parameters() == 784 * 128 + 128 + 128 * 10 + 10);
  CHECK(model->parameters().size() == 4);
  CHECK((*model)[0].path() == "model.0");
  CHECK((*model)[1].type_name() == "ReLU");
}

TEST_CASE("Registration validates names", "[nn]") {
  Custom m;
  m.register_parameter("w", Tensor::zeros({2}));
  CHECK_THROWS_AS(m.register_parameter("w", Tensor::zeros({2})), ValueError);
  CHECK_THROWS_AS(m.register_buffer("w", Tensor::zeros({2})), ValueError);
  CHECK_THROWS_AS(m.register_parameter("a.b", Tensor::zeros({2})), ValueError);
  CHECK_THROWS_AS(m.register_parameter("", Tensor::zeros({2})), ValueError);
  CHECK_THROWS_AS(m.register_parameter("i", Tensor::zeros({2}, DType::I64)), DTypeError);
  CHECK_THROWS_AS(m.register_module("child", std::shared_ptr<Module>()), ValueError);
  m.register_buffer("running", Tensor::ones({3}));
  m.register_module("child", std::make_shared<Linear>(2, 3));
  auto buffers = m.named_buffers();
  REQUIRE(buffers.size() == 1);
  CHECK(buffers[0].first == "running");
  auto names = m.named_parameters();
  REQUIRE(names.size() == 3);
  CHECK(names[1].first == "child.weight");
}

TEST_CASE("Linear initialises like PyTorch from the seeded generator", "[nn]") {
  manual_seed(3);
  Linear a(100, 50);
  manual_seed(3);
  Linear b(100, 50);
  CHECK(a.weight()->value.to_vector<float>() == b.weight()->value.to_vector<float>());
  CHECK(a.bias()->value.to_vector<float>() == b.bias()->value.to_vector<float>());
  Linear c(100, 50);  // the generator moved on
  CHECK(c.weight()->value.to_vector<float>() != a.weight()->value.to_vector<float>());
  const float bound = 1.f / std::sqrt(100.f);
  double mean_abs = 0;
  for (float w : a.weight()->value.to_vector<float>()) {
    REQUIRE(std::fabs(w) <= bound);
    mean_abs += std::fabs(w);
  }
  CHECK(mean_abs / 5000 == Approx(bound / 2).epsilon(0.05));  // uniform: E|w| = bound / 2
  for (float v : a.bias()->value.to_vector<float>()) REQUIRE(std::fabs(v) <= bound);
  CHECK(a.weight()->grad.to_vector<float>() == std::vector<float>(5000, 0.f));
  CHECK_THROWS_AS(Linear(0, 3), ValueError);
}

// A Generator hands out disjoint ranges of its (seed, offset) stream, so a model's init is a pure function of
// the seed and the order of the draws: the weight takes the next out * in words, then the bias the next out.
TEST_CASE("Linear draws its weight, then its bias, from consecutive ranges of its generator's stream", "[nn]") {
  Generator direct(11);
  CHECK(direct.reserve(4) == 0);
  CHECK(direct.reserve(6) == 4);
  CHECK(direct.offset() == 10);

  Generator gen(11);
  gen.reserve(7);  // an earlier draw
  Linear a(5, 3, true, DType::F64, Device::cpu(), gen);
  const double bound = 1.0 / std::sqrt(5.0);
  CHECK(a.weight()->value.to_vector<double>() ==
        Tensor::rand({3, 5}, 11, DType::F64, Device::cpu(), -bound, bound, 7).to_vector<double>());
  CHECK(a.bias()->value.to_vector<double>() ==
        Tensor::rand({3}, 11, DType::F64, Device::cpu(), -bound, bound, 7 + 15).to_vector<double>());
  CHECK(gen.offset() == 7 + 15 + 3);
}

TEST_CASE("backward adds to parameter gradients and zero_grad clears them", "[nn]") {
  manual_seed(1);
  auto model = mlp(6, 5, 3, DType::F64);
  Tensor x = Tensor::randn({4, 6}, 9, DType::F64);
  Tensor g = Tensor::randn({4, 3}, 10, DType::F64);
  model->forward(x);
  Tensor dx1 = model->backward(g);
  std::vector<std::vector<double>> once;
  for (auto& p : model->parameters()) once.push_back(p->grad.to_vector<double>());
  Tensor dx2 = model->backward(g);
  CHECK(dx1.to_vector<double>() == dx2.to_vector<double>());  // the input gradient does not accumulate
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    auto twice = params[i]->grad.to_vector<double>();
    for (size_t j = 0; j < twice.size(); ++j) REQUIRE(twice[j] == Approx(2 * once[i][j]).margin(1e-15));
  }
  bool any_nonzero = false;
  for (auto& v : once)
    for (double d : v) any_nonzero = any_nonzero || d != 0;
  CHECK(any_nonzero);
  model->zero_grad();
  for (auto& p : model->parameters())
    for (double d : p->grad.to_vector<double>()) REQUIRE(d == 0);
}

TEST_CASE("set_input_grad(false): the same parameter gradients, and no input gradient", "[nn]") {
  manual_seed(2);
  // Flatten before the first Linear: backward must stop at the Linear, Flatten has nothing to accumulate.
  auto model = std::make_shared<Sequential>(std::make_shared<Flatten>(), std::make_shared<Linear>(6, 5, true, DType::F64),
                                            std::make_shared<ReLU>(), std::make_shared<Linear>(5, 3, true, DType::F64));
  Tensor x = Tensor::randn({4, 2, 3}, 9, DType::F64);
  Tensor g = Tensor::randn({4, 3}, 10, DType::F64);
  auto grads = [&] {
    model->zero_grad();
    model->forward(x);
    Tensor dx = model->backward(g);
    std::vector<std::vector<double>> out;
    for (auto& p : model->parameters()) out.push_back(p->grad.to_vector<double>());
    return std::pair{dx, out};
  };
  auto [dx_with, with] = grads();
  REQUIRE(dx_with.shape() == x.shape());
  model->set_input_grad(false);
  CHECK_FALSE(model->input_grad());
  CHECK_FALSE((*model)[1].input_grad());  // the first layer with parameters
  CHECK((*model)[3].input_grad());
  auto [dx_without, without] = grads();
  CHECK_FALSE(dx_without.defined());
  CHECK(without == with);
  model->set_input_grad(true);
  auto [dx_again, again] = grads();
  CHECK(dx_again.to_vector<double>() == dx_with.to_vector<double>());
  Linear alone(6, 2);
  alone.set_input_grad(false);
  alone.forward(Tensor::ones({3, 6}));
  CHECK_FALSE(alone.backward(Tensor::ones({3, 2})).defined());
  CHECK(Sequential().backward(Tensor::ones({1})).defined());  // nothing to skip: the gradient passes through
}

TEST_CASE("backward before forward is a clear error", "[nn]") {
  Linear l(3, 2);
  CHECK_THROWS_WITH(l.backward(Tensor::ones({1, 2})), Catch::Contains("backward() called before forward()"));
  ReLU r;
  CHECK_THROWS_AS(r.backward(Tensor::ones({1, 2})), ValueError);
  Flatten f;
  CHECK_THROWS_AS(f.backward(Tensor::ones({1, 2})), ValueError);
  CrossEntropyLoss ce;
  CHECK_THROWS_AS(ce.backward(), ValueError);
}

TEST_CASE("forward checks the input's device, features and dtype, naming the module", "[nn]") {
  auto model = mlp(8, 4, 2);
  Tensor x_meta = Tensor::empty({3, 8}, DType::F32, Device::meta());
  CHECK_THROWS_AS(model->forward(x_meta), DeviceMismatchError);
  CHECK_THROWS_WITH(model->forward(x_meta),
                    "Expected all tensors to be on the same device, but model.0 (Linear) got input on meta and its "
                    "parameters on cpu. Move the input with .to(cpu) inside the training loop, or the model with "
                    ".to(meta).");
  CHECK_THROWS_WITH(model->forward(Tensor::ones({3, 7})),
                    "model.0 (Linear) expects input with 8 features in the last dim, but got shape [3, 7]");
  CHECK_THROWS_AS(model->forward(Tensor::ones({3, 8}, DType::F64)), DTypeError);
}

TEST_CASE("to(device) moves parameters and grads in place, and handles held elsewhere see it", "[nn]") {
  auto model = mlp(8, 4, 2);
  nn::ParameterPtr held = model->parameters()[0];
  TransferLedger::global().reset();
  model->to(Device::cpu());  // already there: nothing copied, same storage
  CHECK(held->value.storage() == model->parameters()[0]->value.storage());
  CHECK(TransferLedger::global().stats(TransferDirection::HostToDevice).count == 0);
  model->to(Device::meta());
  CHECK(held->value.device().is_meta());
  CHECK(held->grad.device().is_meta());
  CHECK(model->device().is_meta());
  // A meta model runs forward on meta inputs: shapes only.
  CHECK(model->forward(Tensor::empty({5, 8}, DType::F32, Device::meta())).shape() == Shape{5, 2});
  auto m64 = mlp(3, 2, 1);
  m64->to(DType::F64);
  CHECK(m64->dtype() == DType::F64);
  CHECK(m64->parameters()[0]->grad.dtype() == DType::F64);
}

TEST_CASE("Dropout is seeded in training and the identity in eval", "[nn]") {
  Generator gen(5);
  Dropout d(0.5, gen);
  Tensor x = Tensor::ones({1000});
  auto y = d.forward(x).to_vector<float>();
  int zeros = 0;
  for (float v : y) {
    REQUIRE((v == 0.f || v == 2.f));
    zeros += v == 0.f;
  }
  CHECK(zeros == Approx(500).margin(60));
  auto g = d.backward(Tensor::ones({1000})).to_vector<float>();
  CHECK(g == y);  // same mask
  d.eval();
  CHECK(d.forward(x).storage() == x.storage());
  CHECK_THROWS_AS(Dropout(1.0), ValueError);
  Generator again(5);
  Dropout d2(0.5, again);
  CHECK(d2.forward(x).to_vector<float>() == y);
}

TEST_CASE("train() and eval() reach every child", "[nn]") {
  auto model = std::make_shared<Sequential>(std::make_shared<Linear>(4, 4), std::make_shared<Dropout>(0.3));
  model->eval();
  CHECK_FALSE((*model)[1].is_training());
  model->train();
  CHECK((*model)[1].is_training());
}

TEST_CASE("Flatten and Identity pass gradients back in the input's shape", "[nn]") {
  Flatten f;
  Tensor x = Tensor::arange(24).view({2, 3, 4});
  CHECK(f.forward(x).shape() == Shape{2, 12});
  CHECK(f.backward(Tensor::ones({2, 12})).shape() == Shape{2, 3, 4});
  Identity id;
  CHECK(id.forward(x).storage() == x.storage());
}

TEST_CASE("A summary on meta tensors reports shapes, parameters and memory without allocating", "[nn]") {
  auto model = std::make_shared<Sequential>(std::make_shared<Flatten>(), std::make_shared<Linear>(784, 256),
                                                       std::make_shared<ReLU>(), std::make_shared<Linear>(256, 10));
  model->to(Device::meta());
  ModelSummary s = summarize(*model, {128, 28, 28});
  REQUIRE(s.layers.size() == 5);
  CHECK(s.layers[0].path == "model");
  CHECK(s.layers[1].type == "Flatten");
  CHECK(s.layers[1].output_shape == Shape{128, 784});
  CHECK(s.layers[2].output_shape == Shape{128, 256});
  CHECK(s.layers[2].parameters == 784 * 256 + 256);
  CHECK(s.layers[4].output_shape == Shape{128, 10});
  CHECK(s.parameters == 784 * 256 + 256 + 256 * 10 + 10);
  CHECK(s.parameter_bytes == 4 * s.parameters);
  CHECK(s.input_bytes == 128 * 784 * 4);
  CHECK(s.activation_bytes == 4 * 128 * (784 + 256 + 256 + 10));
  std::string table = s.table();
  CHECK_THAT(table, Catch::Contains("model.1") && Catch::Contains("[128, 256]") && Catch::Contains("meta"));
}

TEST_CASE("Losses: cross-entropy and MSE values and gradients", "[nn]") {
  CrossEntropyLoss ce;
  Tensor logits = Tensor::from_vector<double>({0, 0, 0, 1, 2, 3}, {2, 3});
  Tensor labels = Tensor::from_vector<int64_t>({0, 2}, {2});
  double loss = ce.forward(logits, labels).item<double>();
  double expected = (std::log(3.0) + (std::log(std::exp(1.) + std::exp(2.) + std::exp(3.)) - 3)) / 2;
  CHECK(loss == Approx(expected).epsilon(1e-12));
  auto g = ce.backward().to_vector<double>();
  CHECK(g[0] == Approx((1.0 / 3 - 1) / 2));
  CHECK_THROWS_AS(ce.forward(logits, Tensor::from_vector<int64_t>({0, 3}, {2})), ValueError);

  MSELoss mse;
  Tensor p = Tensor::from_vector<double>({1, 2, 3, 4}, {4}), t = Tensor::from_vector<double>({0, 2, 5, 4}, {4});
  CHECK(mse.forward(p, t).item<double>() == Approx((1 + 0 + 4 + 0) / 4.0));
  CHECK(mse.backward().to_vector<double>() == std::vector<double>{0.5, 0, -1, 0});
}
