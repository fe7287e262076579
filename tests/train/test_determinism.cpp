// Determinism: the same seed on the same device gives bit-identical losses, and the same weights at any thread count.
#include <catch2/catch.hpp>

#include <vector>

#include "core/ops.h"
#include "nn/loss.h"
#include "models/architecture.h"
#include "support/threads.h"
#include "optim/optimizer.h"

using namespace ember;

namespace {

// 100 SGD steps of a 784-64-10 MLP on seeded synthetic batches; returns every loss.
std::vector<float> hundred_steps(uint64_t seed) {
  Generator init(seed);
  auto model = models::make_model(models::Architecture::mlp({64}), Device::cpu(), init);
  optim::SGD sgd(model->parameters(), {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true});
  nn::CrossEntropyLoss ce;
  std::vector<float> losses;
  for (int step = 0; step < 100; ++step) {
    Tensor x = Tensor::rand({32, 784}, seed * 1000 + step);
    Tensor y = ops::argmax(x.slice(1, 0, 10));
    sgd.zero_grad();
    losses.push_back(ce.forward(model->forward(x), y).item<float>());
    model->backward(ce.backward());
    sgd.step();
  }
  return losses;
}

}  // namespace

TEST_CASE("Same seed, device and threads give bit-identical losses over 100 steps on CPU", "[train]") {
  std::vector<float> a = hundred_steps(3), b = hundred_steps(3), c = hundred_steps(4);
  CHECK(a == b);
  CHECK(a != c);
}

namespace {

// 20 steps of ember train's MLP (784-256-128-10, batch 128, Nesterov, weight decay) at a thread count; returns
// every weight and bias.
std::vector<std::vector<float>> trained_weights(int threads) {
  test::ThreadsScope scope(threads);
  Generator init(7);
  auto model = models::make_model(models::Architecture::mlp({256, 128}), Device::cpu(), init);
  model->set_input_grad(false);
  optim::SGD sgd(model->parameters(), {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true});
  nn::CrossEntropyLoss ce;
  for (int step = 0; step < 20; ++step) {
    Tensor x = Tensor::rand({128, 784}, 500 + step);
    Tensor y = ops::argmax(x.slice(1, 0, 10));
    sgd.zero_grad();
    ce.forward(model->forward(x), y);
    model->backward(ce.backward());
    sgd.step();
  }
  std::vector<std::vector<float>> out;
  for (const auto& p : model->parameters()) out.push_back(p->value.to_vector<float>());
  return out;
}

}  // namespace

TEST_CASE("The same seed gives bit-identical weights at 1, 2 and 3 threads", "[train]") {
  const auto one = trained_weights(1);
  CHECK(trained_weights(2) == one);
  CHECK(trained_weights(3) == one);
  CHECK(trained_weights(1) == one);
}
