// Conv2d, MaxPool2d and BatchNorm2d as modules: PyTorch's numbers for one training step of a conv-BN-ReLU-pool
// stack, PyTorch's names, buffers through to(), train()/eval(), state_dict, input errors, gradient checks.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/ops.h"
#include "nn/nn.h"
#include "support/cnn_gradcheck.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "optim/optimizer.h"

using namespace ember;
using namespace ember::nn;

namespace {
#include "nn/torch_cnn_fixture.inc"

Tensor fill(const Shape& shape, double a, double b, double scale = 0.5, double offset = 0) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = offset + std::sin(a * double(i) + b) * scale;
  return Tensor::from_vector(v, shape);
}

template <size_t N> std::vector<double> vec(const double (&a)[N]) { return std::vector<double>(a, a + N); }
std::vector<double> f64(const Tensor& t) { return t.to(Device::cpu()).to(DType::F64).to_vector<double>(); }

// The stack of tests/fixtures/torch/make_cnn_fixture.py, with its closed-form weights.
std::shared_ptr<Sequential> fixture_model(DType dtype) {
  auto model = std::make_shared<Sequential>(
      std::make_shared<Conv2d>(2, 4, 3, 1, 1, true, dtype), std::make_shared<BatchNorm2d>(4, 1e-5, 0.1, dtype),
      std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2), std::make_shared<Conv2d>(4, 4, 2, 2, 1, true, dtype),
      std::make_shared<Flatten>(), std::make_shared<Linear>(16, 5, true, dtype));
  std::map<std::string, Tensor> values{
      {"0.weight", fill({4, 2, 3, 3}, 0.37, 0.1)}, {"0.bias", fill({4}, 1.3, 0.2)},
      {"1.weight", fill({4}, 0.9, 0.7, 0.3, 1)},   {"1.bias", fill({4}, 1.7, 0.5, 0.2)},
      {"4.weight", fill({4, 4, 2, 2}, 0.61, 0.25)}, {"4.bias", fill({4}, 2.3, 0.6)},
      {"6.weight", fill({5, 16}, 0.71, 0.3)},       {"6.bias", fill({5}, 2.1, 0.4)}};
  for (auto& [name, p] : model->named_parameters()) p->value.copy_from(values.at(name).to(dtype));
  return model;
}

}  // namespace

TEST_CASE("A conv-BN-ReLU-pool stack matches PyTorch: forward, backward, running statistics, SGD step, eval",
          "[nn]") {
  for (DType dtype : {DType::F64, DType::F32}) {
    INFO(dtype_name(dtype));
    const test::Tolerance tol = dtype == DType::F64 ? test::Tolerance{1e-12, 1e-10} : test::Tolerance{1e-5, 1e-4};
    auto model = fixture_model(dtype);
    Tensor x = fill({3, 2, 7, 6}, 0.53, 0.5, 2.0).to(dtype);
    Tensor y = Tensor::from_vector<int64_t>({0, 4, 2}, {3});
    optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9, .dampening = 0, .weight_decay = 5e-4, .nesterov = true});
    CrossEntropyLoss ce;
    sgd.zero_grad();
    Tensor logits = model->forward(x);
    const double loss = ce.forward(logits, y).item_as_double();
    Tensor dx = model->backward(ce.backward());
    REQUIRE_CLOSE(f64(logits), vec(kTorchCnnLogits), tol);
    CHECK(loss == Approx(kTorchCnnLoss).epsilon(dtype == DType::F64 ? 1e-12 : 1e-6));
    REQUIRE_CLOSE(f64(dx), vec(kTorchCnnInputGrad), tol);
    std::map<std::string, std::vector<double>> grads{
        {"0.weight", vec(kTorchCnnGrad_0_weight)}, {"0.bias", vec(kTorchCnnGrad_0_bias)},
        {"1.weight", vec(kTorchCnnGrad_1_weight)}, {"1.bias", vec(kTorchCnnGrad_1_bias)},
        {"4.weight", vec(kTorchCnnGrad_4_weight)}, {"4.bias", vec(kTorchCnnGrad_4_bias)},
        {"6.weight", vec(kTorchCnnGrad_6_weight)}, {"6.bias", vec(kTorchCnnGrad_6_bias)}};
    for (auto& [name, p] : model->named_parameters()) {
      INFO(name);
      REQUIRE_CLOSE(f64(p->grad), grads.at(name), tol);
    }
    sgd.step();
    std::map<std::string, std::vector<double>> after{
        {"0.weight", vec(kTorchCnnAfter_0_weight)}, {"0.bias", vec(kTorchCnnAfter_0_bias)},
        {"1.weight", vec(kTorchCnnAfter_1_weight)}, {"1.bias", vec(kTorchCnnAfter_1_bias)},
        {"1.running_mean", vec(kTorchCnnAfter_1_running_mean)}, {"1.running_var", vec(kTorchCnnAfter_1_running_var)},
        {"1.num_batches_tracked", vec(kTorchCnnAfter_1_num_batches_tracked)},
        {"4.weight", vec(kTorchCnnAfter_4_weight)}, {"4.bias", vec(kTorchCnnAfter_4_bias)},
        {"6.weight", vec(kTorchCnnAfter_6_weight)}, {"6.bias", vec(kTorchCnnAfter_6_bias)}};
    for (auto& [name, t] : model->state_dict()) {
      INFO(name);
      REQUIRE_CLOSE(f64(t), after.at(name), tol);
    }
    model->eval();
    // Eval logits are ~50 in size: float keeps them to a few 1e-5 relative.
    const test::Tolerance eval_tol = dtype == DType::F64 ? tol : test::Tolerance{1e-4, 1e-4};
    REQUIRE_CLOSE(f64(model->forward(x)), vec(kTorchCnnEvalLogits), eval_tol);
  }
}

TEST_CASE("CNN modules use PyTorch's state_dict names, order and dtypes", "[nn]") {
  auto model = fixture_model(DType::F32);
  auto state = model->state_dict();
  REQUIRE(state.size() == std::size(kTorchCnnStateKeys));
  for (size_t i = 0; i < state.size(); ++i) CHECK(state[i].first == kTorchCnnStateKeys[i]);
  CHECK(state[6].second.dtype() == DType::I64);
  CHECK(state[6].second.dim() == 0);
  CHECK(model->named_parameters().size() == 8);  // buffers are not parameters: the optimizer never sees them
  CHECK(model->named_buffers().size() == 3);
}

TEST_CASE("BatchNorm2d buffers follow to(dtype) and to(device) and switch meaning with train()/eval()", "[nn]") {
  BatchNorm2d bn(3);
  Tensor x = Tensor::randn({4, 3, 5, 5}, 2, DType::F32, Device::cpu(), 2.0, 3.0);
  Tensor y_before = bn.forward(x);  // training: normalised with the batch statistics
  CHECK(bn.num_batches_tracked().item<int64_t>() == 1);
  const std::vector<float> rm = bn.running_mean().to_vector<float>();
  CHECK(rm[0] == Approx(0.2).margin(0.05));  // 0.1 * batch mean of ~2
  bn.eval();
  Tensor y_eval = bn.forward(x);  // eval: the running statistics, which eval leaves alone
  CHECK(bn.num_batches_tracked().item<int64_t>() == 1);
  CHECK(bn.running_mean().to_vector<float>() == rm);
  const float rv0 = bn.running_var().to_vector<float>()[0];
  CHECK(y_eval.to_vector<float>()[0] == Approx((x.to_vector<float>()[0] - rm[0]) / std::sqrt(rv0 + 1e-5f)));
  CHECK(y_eval.to_vector<float>()[0] != Approx(y_before.to_vector<float>()[0]));
  bn.to(DType::F64);
  CHECK(bn.running_mean().dtype() == DType::F64);
  CHECK(bn.running_var().dtype() == DType::F64);
  CHECK(bn.num_batches_tracked().dtype() == DType::I64);  // counts stay integers
  CHECK(bn.running_mean().to_vector<double>()[1] == Approx(rm[1]));
  bn.to(Device::meta());
  for (auto& [name, b] : bn.named_buffers()) CHECK(b.device().is_meta());
  CHECK(bn.forward(Tensor::empty({2, 3, 4, 4}, DType::F64, Device::meta())).shape() == Shape{2, 3, 4, 4});
}

TEST_CASE("CNN modules reject wrong input with the module path and the (N, C, H, W) they expect", "[nn]") {
  auto model = std::make_shared<Sequential>(std::make_shared<Conv2d>(1, 8, 3, 1, 1), std::make_shared<BatchNorm2d>(8),
                                            std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
                                            std::make_shared<Conv2d>(8, 4, 5));
  CHECK_THROWS_WITH(model->forward(Tensor::zeros({2, 784})),
                    "model.0 (Conv2d) expects input of shape (N, 1, H, W) with H >= 1 and W >= 1 (a 3x3 kernel with "
                    "padding (1, 1)), but got [2, 784]");
  CHECK_THROWS_AS(model->forward(Tensor::zeros({2, 3, 28, 28})), ShapeError);
  CHECK_THROWS_WITH(model->forward(Tensor::zeros({2, 3, 28, 28})), Catch::Contains("(N, 1, H, W)"));
  // 8x8 -> pool -> 4x4: too small for the last conv's 5x5 kernel.
  CHECK_THROWS_WITH(model->forward(Tensor::zeros({2, 1, 8, 8})),
                    Catch::StartsWith("model.4 (Conv2d) expects input of shape (N, 8, H, W) with H >= 5 and W >= 5") &&
                        Catch::Contains("but got [2, 8, 4, 4]"));
  CHECK_THROWS_WITH(model->forward(Tensor::zeros({2, 1, 1, 1})),
                    Catch::StartsWith("model.3 (MaxPool2d) expects input of shape (N, C, H, W) with H >= 2 and W >= 2"));
  BatchNorm2d bn(8);
  CHECK_THROWS_WITH(bn.forward(Tensor::zeros({2, 4, 3, 3})), Catch::Contains("(N, 8, H, W)"));
  CHECK_THROWS_WITH(bn.forward(Tensor::zeros({1, 8, 1, 1})), Catch::Contains("more than 1 value per channel"));
  CHECK_THROWS_AS(Conv2d(0, 3, 3), ValueError);
  CHECK_THROWS_AS(MaxPool2d(2, 2, 2), ValueError);  // padding over half the kernel
}

TEST_CASE("The summary of a CNN on the meta device: conv shapes, parameters and memory, nothing allocated", "[nn]") {
  auto model = std::make_shared<Sequential>(std::make_shared<Conv2d>(1, 32, 3, 1, 1), std::make_shared<BatchNorm2d>(32),
                                            std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
                                            std::make_shared<Flatten>(), std::make_shared<Linear>(32 * 14 * 14, 10));
  model->to(Device::meta());
  ModelSummary s = summarize(*model, {128, 1, 28, 28});
  REQUIRE(s.layers.size() == 7);
  CHECK(s.layers[1].type == "Conv2d");
  CHECK(s.layers[1].output_shape == Shape{128, 32, 28, 28});
  CHECK(s.layers[1].parameters == 32 * 9 + 32);
  CHECK(s.layers[2].parameters == 64);  // weight and bias; running statistics are buffers
  CHECK(s.layers[4].output_shape == Shape{128, 32, 14, 14});
  CHECK(s.activation_bytes == 4 * (3 * 128 * 32 * 28 * 28 + 2 * 128 * 32 * 14 * 14 + 128 * 10));
}

TEST_CASE("Float64 gradient checks of Conv2d, MaxPool2d and BatchNorm2d (both modes) as modules", "[nn]") {
  manual_seed(5);
  Conv2d strided(3, 2, {3, 2}, {2, 1}, {1, 0}, true, DType::F64);
  ember::test::gradcheck_module(strided, Tensor::randn({1, 3, 7, 6}, 1, DType::F64));  // batch 1, odd sizes
  Conv2d plain(2, 3, 3, 1, 1, true, DType::F64);
  ember::test::gradcheck_module(plain, Tensor::randn({2, 2, 5, 5}, 2, DType::F64));
  MaxPool2d pool(3, 2, 1);
  ember::test::gradcheck_module(pool, Tensor::randn({2, 2, 7, 7}, 3, DType::F64));
  BatchNorm2d bn(3, 1e-5, 0.1, DType::F64);
  bn.weight()->value.copy_from(Tensor::from_vector<double>({0.5, 1.5, -1.0}, {3}));
  ember::test::gradcheck_module(bn, Tensor::randn({2, 3, 3, 5}, 4, DType::F64));
  bn.eval();
  ember::test::gradcheck_module(bn, Tensor::randn({2, 3, 3, 5}, 5, DType::F64));
}

TEST_CASE("Float64 gradient check of a whole CNN through cross-entropy (fused BatchNorm -> ReLU -> MaxPool2d)",
          "[nn]") {
  for (bool training : {true, false}) {
    INFO("training " << training);
    auto model = fixture_model(DType::F64);
    REQUIRE(fuse(*model) == 2);  // BatchNorm2d -> ReLU, then with the MaxPool2d
    REQUIRE((*model)[1].type_name() == "BatchNormReLUPool");
    model->train(training);
    Tensor x = fill({3, 2, 7, 6}, 0.53, 0.5, 2.0).to(DType::F64);
    Tensor labels = Tensor::from_vector<int64_t>({0, 4, 2}, {3});
    if (!training) {  // meaningful running statistics first
      model->train();
      model->forward(x);
      model->eval();
    }
    ember::test::gradcheck_cross_entropy(*model, x, labels);
  }
}

TEST_CASE("Float64 gradient check of a strided, padded CNN on the CPU (the one tests/cuda runs on the GPU)", "[nn]") {
  ember::test::gradcheck_cnn_on(Device::cpu());
}

TEST_CASE("A first Conv2d told its input is data skips the input gradient and still accumulates its own", "[nn]") {
  auto model = fixture_model(DType::F64);
  Tensor x = fill({3, 2, 7, 6}, 0.53, 0.5, 2.0).to(DType::F64);
  Tensor labels = Tensor::from_vector<int64_t>({0, 4, 2}, {3});
  CrossEntropyLoss ce;
  ce.forward(model->forward(x), labels);
  CHECK(model->backward(ce.backward()).defined());
  const std::vector<double> once = model->named_parameters()[0].second->grad.to_vector<double>();
  model->set_input_grad(false);
  CHECK_FALSE((*model)[0].input_grad());
  CHECK((*model)[4].input_grad());  // only the first layer sees the data
  ce.forward(model->forward(x), labels);
  CHECK_FALSE(model->backward(ce.backward()).defined());
  const std::vector<double> twice = model->named_parameters()[0].second->grad.to_vector<double>();
  for (size_t i = 0; i < once.size(); ++i) CHECK(twice[i] == Approx(2 * once[i]));
}

TEST_CASE("load_state_dict copies in place and names what is missing, unexpected or misshapen", "[nn]") {
  auto source = fixture_model(DType::F64);
  source->forward(fill({3, 2, 7, 6}, 0.1, 0.2).to(DType::F64));  // running statistics worth copying
  manual_seed(99);
  auto target = std::make_shared<Sequential>(
      std::make_shared<Conv2d>(2, 4, 3, 1, 1), std::make_shared<BatchNorm2d>(4), std::make_shared<ReLU>(),
      std::make_shared<MaxPool2d>(2), std::make_shared<Conv2d>(4, 4, 2, 2, 1), std::make_shared<Flatten>(),
      std::make_shared<Linear>(16, 5));
  Tensor weight_handle = target->named_parameters()[0].second->value;
  target->load_state_dict(source->state_dict());  // float64 values into float32 tensors: converted
  REQUIRE_CLOSE(f64(weight_handle), f64(source->named_parameters()[0].second->value), test::kF32);
  REQUIRE_CLOSE(f64(target->state_dict()[4].second), f64(source->state_dict()[4].second), test::kF32);
  CHECK(target->state_dict()[6].second.item<int64_t>() == 1);

  auto partial = source->state_dict();
  partial.erase(partial.begin() + 5);  // 1.running_var
  partial.emplace_back("9.weight", Tensor::zeros({1}));
  CHECK_THROWS_WITH(target->load_state_dict(partial),
                    "load_state_dict for model (Sequential): missing keys: 1.running_var; unexpected keys: 9.weight");
  target->load_state_dict(partial, /*strict=*/false);
  auto wrong = source->state_dict();
  wrong[0].second = Tensor::zeros({4, 2, 3, 2});
  CHECK_THROWS_WITH(target->load_state_dict(wrong),
                    "load_state_dict: '0.weight' has shape [4, 2, 3, 2] but model expects [4, 2, 3, 3]");
}

TEST_CASE("A summary changes nothing: BatchNorm statistics, Dropout's generator and each module's mode", "[nn]") {
  Generator generator(7);
  auto bn = std::make_shared<BatchNorm2d>(4);
  auto head = std::make_shared<Linear>(4 * 3 * 3, 5);
  auto model = std::make_shared<Sequential>(std::make_shared<Conv2d>(1, 4, 3, 1, 1), bn, std::make_shared<ReLU>(),
                                            std::make_shared<MaxPool2d>(2), std::make_shared<Flatten>(),
                                            std::make_shared<Dropout>(0.5, generator), head);
  head->eval();  // one child in eval mode while the rest trains: both modes must come back
  auto copy_state = [&] {
    std::vector<std::pair<std::string, std::vector<double>>> out;
    for (const auto& [name, t] : model->state_dict()) out.emplace_back(name, t.to(DType::F64).to_vector<double>());
    return out;
  };
  const auto before = copy_state();
  const uint64_t offset = generator.offset();
  ModelSummary s = summarize(*model, {8, 1, 6, 6});
  CHECK(s.layers.size() == 8);
  CHECK(copy_state() == before);  // running statistics and num_batches_tracked untouched
  CHECK(generator.offset() == offset);
  CHECK(model->is_training());
  CHECK(bn->is_training());
  CHECK_FALSE(head->is_training());
}
