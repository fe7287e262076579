// The device-placement lesson on ember, as a program built against the installed package:
//   1. device-agnostic code picks cuda when it is available, else cpu;
//   2. .to(device) copies a tensor, and moves a whole model's parameters;
//   3. an op on tensors of two devices is an error, caught and printed here;
//   4. a training loop moves the model once and each batch inside the loop.
// Exits 1 if the loss did not fall, so a test that runs it can fail.
#include <ember/ember.h>

#include <cstdio>
#include <iostream>
#include <memory>

using namespace ember;

namespace {

void show_placement(Device device) {
  Tensor x = Tensor::arange(6).view({2, 3});
  Tensor y = x.to(device);  // a PCIe copy when device is cuda; x itself when it is cpu
  std::cout << "x on " << x.device().str() << ", y = x.to(" << device.str() << ") on " << y.device().str() << "\n";

  // Without a GPU there is no second real device: a meta tensor (shape only) stands in for one.
  Tensor other = device.is_cuda() ? x : Tensor::empty({2, 3}, DType::F32, Device::meta());
  try {
    Tensor z = y + other;
    std::cout << "no error?! both on " << z.device().str() << "\n";
  } catch (const DeviceMismatchError& e) {
    std::cout << "y + a tensor on " << other.device().str() << " -> DeviceMismatchError:\n  " << e.what() << "\n";
  }
}

// Trains a small MLP on a learnable rule (the class is the largest of the first ten inputs); returns the mean
// loss of the first and of the last five steps.
std::pair<double, double> fit(Device device) {
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(32, 64), std::make_shared<nn::ReLU>(),
                                                std::make_shared<nn::Linear>(64, 10));
  model->to(device);  // once, before the loop: parameters and gradients, in place
  optim::SGD optimizer(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  nn::CrossEntropyLoss loss_fn;

  double first = 0, last = 0;
  const int steps = 60;
  for (int step = 0; step < steps; ++step) {
    Tensor x = Tensor::randn({128, 32}, /*seed=*/step % 6);  // a batch on the host, as a loader gives it
    Tensor y = ops::argmax(x.slice(1, 0, 10));
    x = x.to(device);  // each batch moves inside the loop
    y = y.to(device);

    optimizer.zero_grad();
    Tensor loss = loss_fn.forward(model->forward(x), y);
    model->backward(loss_fn.backward());
    optimizer.step();
    double value = loss.item<float>();
    if (step < 5) first += value / 5;
    if (step >= steps - 5) last += value / 5;
  }
  return {first, last};
}

}  // namespace

int main() {
  try {
    Device device = cuda::is_available() ? Device::cuda() : Device::cpu();
    std::cout << "ember " << EMBER_VERSION << ", device: " << device.str() << "\n";
    show_placement(device);
    auto [first, last] = fit(device);
    std::printf("loss: first steps %.3f, last steps %.3f\n", first, last);
    std::cout << "copies: " << TransferLedger::global().summary();
    return last < 0.5 * first ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "seed_lesson: %s\n", e.what());
    return 1;
  }
}
