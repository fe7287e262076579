// Explicit fusion: LinearReLU, BatchNormReLU and BatchNormReLUPool obey the gradient contract on their own, and
// nn::fuse() turns a user's Sequential into them without changing a name, an output or a gradient.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/ops.h"
#include "nn/nn.h"
#include "optim/optimizer.h"
#include "support/gradcheck.h"

using namespace ember;
using namespace ember::nn;

namespace {

// conv -> BN -> ReLU -> pool -> flatten -> Linear -> ReLU -> Dropout -> Linear -> ReLU -> Linear, seeded.
std::shared_ptr<Sequential> user_model(DType dtype) {
  Generator gen(3);
  return std::make_shared<Sequential>(
      std::make_shared<Conv2d>(2, 3, 3, 1, 1, true, dtype, Device::cpu(), gen),
      std::make_shared<BatchNorm2d>(3, 1e-5, 0.1, dtype), std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
      std::make_shared<Flatten>(), std::make_shared<Linear>(3 * 3 * 2, 8, true, dtype, Device::cpu(), gen),
      std::make_shared<ReLU>(), std::make_shared<Dropout>(0.0, gen),
      std::make_shared<Linear>(8, 6, false, dtype, Device::cpu(), gen), std::make_shared<ReLU>(),
      std::make_shared<Linear>(6, 4, true, dtype, Device::cpu(), gen));
}

std::vector<std::string> names(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.state_dict()) out.push_back(name);
  return out;
}

std::vector<double> values(const Tensor& t) { return t.to(DType::F64).to_vector<double>(); }

}  // namespace

TEST_CASE("fuse() replaces Linear->ReLU and BatchNorm2d->ReLU->MaxPool2d, keeping PyTorch's names and the Parameters",
          "[nn]") {
  auto model = user_model(DType::F32);
  const std::vector<std::string> before = names(*model);
  const auto params = model->parameters();
  REQUIRE(fuse(*model) == 4);  // two LinearReLU, a BatchNormReLU, then that with the pool
  CHECK(names(*model) == before);  // "1.weight", "5.weight", "8.weight", "10.weight", ...
  const std::vector<std::string> types = {"Conv2d",     "BatchNormReLUPool", "Identity",   "Identity",
                                          "Flatten",    "LinearReLU",        "Identity",   "Dropout",
                                          "LinearReLU", "Identity",          "Linear"};
  for (size_t i = 0; i < types.size(); ++i) CHECK((*model)[i].type_name() == types[i]);
  CHECK((*model)[5].path() == "model.5");
  const auto fused = model->parameters();
  REQUIRE(fused.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) CHECK(fused[i] == params[i]);  // the same Parameter objects
  CHECK(fuse(*model) == 0);  // nothing left: a fused module is not fused again
}

TEST_CASE("fuse() leaves pairs that are not a Linear or BatchNorm2d right before a ReLU", "[nn]") {
  auto dropout_between = std::make_shared<Sequential>(std::make_shared<Linear>(4, 4), std::make_shared<Dropout>(0.5),
                                                      std::make_shared<ReLU>());
  auto relu_first = std::make_shared<Sequential>(std::make_shared<ReLU>(), std::make_shared<Linear>(4, 4));
  auto nested = std::make_shared<Sequential>(
      std::make_shared<Sequential>(std::make_shared<Linear>(4, 4)), std::make_shared<ReLU>());
  CHECK(fuse(*dropout_between) == 0);
  CHECK(fuse(*relu_first) == 0);
  CHECK(fuse(*nested) == 0);
  CHECK((*nested)[1].type_name() == "ReLU");
  // A pool fuses into a BatchNormReLU right before it (Identity modules between), not into a BatchNorm2d alone.
  auto norm_pool = std::make_shared<Sequential>(std::make_shared<BatchNorm2d>(2), std::make_shared<MaxPool2d>(2));
  auto relu_pool = std::make_shared<Sequential>(std::make_shared<BatchNormReLU>(2), std::make_shared<MaxPool2d>(2));
  CHECK(fuse(*norm_pool) == 0);
  CHECK(fuse(*relu_pool) == 1);
  CHECK((*relu_pool)[0].type_name() == "BatchNormReLUPool");
  CHECK((*relu_pool)[1].type_name() == "Identity");
}

TEST_CASE("A fused Sequential gives the unfused one's outputs and gradients, bit for bit, in train and eval", "[nn]") {
  auto plain = user_model(DType::F32), fused = user_model(DType::F32);
  fuse(*fused);
  const Tensor x = Tensor::randn({4, 2, 6, 4}, 5);
  const Tensor labels = Tensor::from_vector<int64_t>({0, 3, 1, 2}, {4});
  for (bool training : {true, false}) {
    INFO("training " << training);
    plain->train(training);
    fused->train(training);
    CrossEntropyLoss ce_plain, ce_fused;
    const Tensor y_plain = plain->forward(x), y_fused = fused->forward(x);
    CHECK(values(y_fused) == values(y_plain));
    ce_plain.forward(y_plain, labels);
    ce_fused.forward(y_fused, labels);
    CHECK(values(fused->backward(ce_fused.backward())) == values(plain->backward(ce_plain.backward())));
    const auto a = plain->state_dict(), b = fused->state_dict();
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(a[i].first);
      CHECK(values(b[i].second) == values(a[i].second));  // running statistics too
    }
    const auto ga = plain->named_parameters(), gb = fused->named_parameters();
    for (size_t i = 0; i < ga.size(); ++i) {
      INFO(ga[i].first);
      CHECK(values(gb[i].second->grad) == values(ga[i].second->grad));
    }
  }
}

TEST_CASE("Float64 gradient checks of BatchNormReLUPool as a module: 2x2 tiles and overlapping windows, both modes",
          "[nn]") {
  for (const ops::Pool2dParams& pool : {ops::Pool2dParams{}, ops::Pool2dParams{3, 3, 2, 2, 1, 1}}) {
    INFO("window " << pool.kernel_h << " stride " << pool.stride_h << " padding " << pool.pad_h);
    BatchNormReLUPool block(3, pool, 1e-5, 0.1, DType::F64);
    block.weight()->value.copy_from(Tensor::from_vector<double>({0.5, 1.5, -1.0}, {3}));
    block.bias()->value.copy_from(Tensor::from_vector<double>({0.1, -0.2, 0.3}, {3}));
    ember::test::gradcheck_module(block, Tensor::randn({2, 3, 5, 7}, 6, DType::F64));
    block.eval();
    ember::test::gradcheck_module(block, Tensor::randn({2, 3, 5, 7}, 7, DType::F64));
  }
}

TEST_CASE("Float64 gradient checks of LinearReLU and BatchNormReLU as modules (both modes)", "[nn]") {
  Generator gen(9);
  LinearReLU linear(5, 4, true, DType::F64, Device::cpu(), gen);
  ember::test::gradcheck_module(linear, Tensor::randn({3, 5}, 1, DType::F64));
  LinearReLU no_bias(5, 3, false, DType::F64, Device::cpu(), gen);
  ember::test::gradcheck_module(no_bias, Tensor::randn({2, 5}, 2, DType::F64));
  BatchNormReLU norm(3, 1e-5, 0.1, DType::F64);
  norm.weight()->value.copy_from(Tensor::from_vector<double>({0.5, 1.5, -1.0}, {3}));
  norm.bias()->value.copy_from(Tensor::from_vector<double>({0.1, -0.2, 0.3}, {3}));
  ember::test::gradcheck_module(norm, Tensor::randn({2, 3, 3, 5}, 4, DType::F64));
  norm.eval();
  ember::test::gradcheck_module(norm, Tensor::randn({2, 3, 3, 5}, 5, DType::F64));
}

TEST_CASE("An optimizer built before fuse() goes on training the fused model", "[nn]") {
  auto model = user_model(DType::F32);
  optim::SGD sgd(model->parameters(), {.lr = 0.1});
  fuse(*model);
  const std::vector<float> before = model->state_dict()[0].second.to_vector<float>();  // 0.weight
  CrossEntropyLoss ce;
  ce.forward(model->forward(Tensor::randn({2, 2, 6, 4}, 6)), Tensor::from_vector<int64_t>({1, 2}, {2}));
  model->backward(ce.backward());
  sgd.step();
  CHECK(model->state_dict()[0].second.to_vector<float>() != before);
}
