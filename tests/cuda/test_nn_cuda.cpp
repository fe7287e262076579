// nn and optim on a real GPU: moves are exact and counted, state follows the model, the whole-MLP
// gradient check passes on CUDA, and training on CUDA follows the CPU's loss curve.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/ops.h"
#include "core/transfer_ledger.h"
#include "nn/nn.h"
#include "support/gradcheck.h"
#include "optim/optimizer.h"

using namespace ember;

namespace {

const Device kGpu = Device::cuda(0);

std::shared_ptr<nn::Sequential> mlp(std::vector<int64_t> sizes, DType dtype, Device device, uint64_t seed) {
  Generator gen(seed);
  auto model = std::make_shared<nn::Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    model->push_back(std::make_shared<nn::Linear>(sizes[i], sizes[i + 1], true, dtype, device, gen));
    if (i + 2 < sizes.size()) model->push_back(std::make_shared<nn::ReLU>());
  }
  return model;
}

}  // namespace

TEST_CASE("A model initialised on CPU or on CUDA from one seed is the same model", "[cuda]") {
  auto a = mlp({784, 256, 10}, DType::F32, Device::cpu(), 7), b = mlp({784, 256, 10}, DType::F32, kGpu, 7);
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) CHECK(pa[i]->value.to_vector<float>() == pb[i]->value.to_vector<float>());
}

TEST_CASE("model.to(cuda) then to(cpu) is bit-identical, one H2D copy per tensor", "[cuda]") {
  auto model = mlp({784, 128, 10}, DType::F32, Device::cpu(), 1);
  std::vector<std::vector<float>> before;
  for (auto& p : model->parameters()) before.push_back(p->value.to_vector<float>());
  TransferLedger::global().reset();
  model->to(kGpu);
  // 4 parameters + 4 gradients, one copy each
  CHECK(TransferLedger::global().stats(TransferDirection::HostToDevice).count == 8);
  model->to(kGpu);  // already there
  CHECK(TransferLedger::global().stats(TransferDirection::HostToDevice).count == 8);
  model->to(Device::cpu());
  CHECK(TransferLedger::global().stats(TransferDirection::DeviceToHost).count == 8);
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) CHECK(params[i]->value.to_vector<float>() == before[i]);
}

TEST_CASE("Optimizer state follows a model moved to the GPU after the optimizer was built", "[cuda]") {
  auto model = mlp({8, 16, 3}, DType::F32, Device::cpu(), 2);
  optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  nn::CrossEntropyLoss ce;
  Tensor x = Tensor::randn({4, 8}, 3), y = Tensor::from_vector<int64_t>({0, 1, 2, 1}, {4});
  sgd.zero_grad();
  ce.forward(model->forward(x), y);
  model->backward(ce.backward());
  sgd.step();
  model->to(kGpu);
  sgd.zero_grad();
  ce.forward(model->forward(x.to(kGpu)), y.to(kGpu));
  model->backward(ce.backward());
  sgd.step();  // PyTorch: "Expected all tensors to be on the same device"; ember moves the state
  for (auto& [name, t] : sgd.state_dict().tensors) CHECK(t.device() == kGpu);
  CHECK_THROWS_WITH(model->forward(x), Catch::Contains("model.0 (Linear) got input on cpu and its parameters on cuda:0"));
}

TEST_CASE("Whole-MLP gradient check on CUDA: 784 -> 32 -> 10 in float64", "[cuda]") {
  auto model = mlp({784, 32, 10}, DType::F64, kGpu, 11);
  Tensor x = Tensor::rand({3, 784}, 5, DType::F64, kGpu);
  Tensor y = Tensor::from_vector<int64_t>({3, 0, 9}, {3}).to(kGpu);
  nn::CrossEntropyLoss ce;
  model->zero_grad();
  ce.forward(model->forward(x), y);
  model->backward(ce.backward());
  for (auto& [name, p] : model->named_parameters()) {
    INFO(name);
    std::vector<double> values = p->value.to_vector<double>();
    std::vector<size_t> indices;
    for (size_t i = 0; i < values.size(); i += values.size() > 2000 ? 97 : 1) indices.push_back(i);
    auto loss_with = [&](const std::vector<double>& v) {
      Tensor saved = p->value.clone();
      p->value.copy_from(Tensor::from_vector(v, p->value.shape()));
      nn::CrossEntropyLoss l;
      double out = l.forward(model->forward(x), y).item<double>();
      p->value.copy_from(saved);
      return out;
    };
    REQUIRE_GRADCHECK(loss_with, values, p->grad.to_vector<double>(), indices);
  }
}

TEST_CASE("Training on CUDA follows the CPU loss curve from the same seed", "[cuda]") {
  std::vector<float> curves[2];
  for (int d = 0; d < 2; ++d) {
    Device device = d == 0 ? Device::cpu() : kGpu;
    auto model = mlp({2, 64, 64, 2}, DType::F32, device, 0);
    optim::AdamW opt(model->parameters(), {.lr = 0.01, .weight_decay = 0});
    nn::CrossEntropyLoss ce;
    Tensor x = Tensor::randn({256, 2}, 1).to(device);
    Tensor y = ops::argmax(Tensor::randn({256, 2}, 2)).to(device);
    for (int step = 0; step < 200; ++step) {
      opt.zero_grad();
      curves[d].push_back(ce.forward(model->forward(x), y).item<float>());
      model->backward(ce.backward());
      opt.step();
    }
  }
  // Sums run in another order on the GPU, so the curves agree closely but not bit for bit. Past ~110 steps this
  // full-batch AdamW starts to oscillate (step-to-step swings of 1e-2), and 1e-7 rounding differences grow as in
  // any chaotic run (seen on the emulated device, 2026-12-03): tight for 100 steps, then the same end point.
  for (size_t i = 0; i < 100; ++i) {
    INFO("step " << i << ": cpu " << curves[0][i] << " cuda " << curves[1][i]);
    REQUIRE(std::fabs(curves[0][i] - curves[1][i]) <= 1e-5 + 1e-4 * std::fabs(curves[0][i]));
  }
  const float cpu_end = curves[0].back(), cuda_end = curves[1].back();
  INFO("final loss: cpu " << cpu_end << " cuda " << cuda_end << ", first " << curves[0].front());
  REQUIRE(std::fabs(cpu_end - cuda_end) <= 0.05f * cpu_end);
  REQUIRE(cuda_end < 0.7f * curves[1].front());
}

TEST_CASE("A label out of range on CUDA is a ValueError at the next synchronisation", "[cuda]") {
  Tensor logits = Tensor::zeros({4, 10}, DType::F32, kGpu);
  Tensor labels = Tensor::from_vector<int64_t>({1, 2, 12, 3}, {4}).to(kGpu);
  ops::CrossEntropy ce = ops::cross_entropy(logits, labels);
  CHECK_THROWS_WITH(ce.loss.item<float>(), Catch::Contains("cross_entropy(): a label is out of range for 10 classes") &&
                                               Catch::Contains("row 2"));
  // The mailbox is reset: the next good loss reads fine.
  Tensor good = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {4}).to(kGpu);
  CHECK(std::isfinite(ops::cross_entropy(logits, good).loss.item<float>()));
}

TEST_CASE("CUDA training is deterministic: same seed, bit-identical losses over 100 steps", "[cuda]") {
  auto run = [] {
    auto model = mlp({784, 64, 10}, DType::F32, kGpu, 3);
    optim::SGD sgd(model->parameters(), {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true});
    nn::CrossEntropyLoss ce;
    std::vector<float> losses;
    for (int step = 0; step < 100; ++step) {
      Tensor x = Tensor::rand({32, 784}, 1000 + step, DType::F32, kGpu);
      Tensor y = ops::argmax(x.slice(1, 0, 10));
      sgd.zero_grad();
      Tensor loss = ce.forward(model->forward(x), y);
      model->backward(ce.backward());
      sgd.step();
      losses.push_back(loss.item<float>());
    }
    return losses;
  };
  CHECK(run() == run());  // no float atomics anywhere in the step
}
