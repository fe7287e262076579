// Float64 gradient check of a small CNN through cross-entropy on any device: stride 2, padding, odd and
// non-square sizes, overlapping padded max pooling, BatchNorm fused with ReLU and pooling, and alone, in train and
// eval mode.
// tests/nn runs it on the CPU, tests/cuda on the GPU, so both backends pass the same check.
#pragma once

#include <memory>
#include <vector>

#include "nn/nn.h"
#include "support/gradcheck.h"

namespace ember::test {

// (3, 2, 9, 7) -> conv 3x3 stride 2 pad 1 -> (3, 3, 5, 4) -> BN + ReLU -> pool 3 stride 2 pad 1 -> (3, 3, 3, 2)
// -> conv (2, 3) pad (0, 1) -> (3, 4, 2, 2) -> BN -> flatten 16 -> linear 5.
inline std::shared_ptr<nn::Sequential> gradcheck_cnn(Device device) {
  Generator gen(21);
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(2, 3, 3, 2, 1, true, DType::F64, device, gen),
      std::make_shared<nn::BatchNorm2d>(3, 1e-5, 0.1, DType::F64, device), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(3, 2, 1),
      std::make_shared<nn::Conv2d>(3, 4, nn::Size2{2, 3}, 1, nn::Size2{0, 1}, true, DType::F64, device, gen),
      std::make_shared<nn::BatchNorm2d>(4, 1e-5, 0.1, DType::F64, device), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(16, 5, true, DType::F64, device, gen));
  nn::fuse(*model);  // the first BatchNorm2d -> ReLU -> MaxPool2d becomes a BatchNormReLUPool
  return model;
}

// Checks dL/dx and every parameter's gradient of L = cross-entropy(model(x), labels) against central differences,
// in the model's current mode, on x's device.
inline void gradcheck_cross_entropy(nn::Module& model, Tensor x, const Tensor& labels) {
  nn::CrossEntropyLoss ce;
  model.zero_grad();
  ce.forward(model.forward(x), labels);
  const Tensor dx = model.backward(ce.backward());
  auto loss_with = [&](Tensor& target) {
    return [&](const std::vector<double>& v) {
      Tensor saved = target.clone();
      target.copy_from(Tensor::from_vector(v, target.shape()).to(target.device()));
      nn::CrossEntropyLoss l;
      const double loss = l.forward(model.forward(x), labels).item<double>();
      target.copy_from(saved);
      return loss;
    };
  };
  REQUIRE_GRADCHECK(loss_with(x), x.to_vector<double>(), dx.to_vector<double>());
  for (auto& [name, p] : model.named_parameters()) {
    INFO(name);
    REQUIRE_GRADCHECK(loss_with(p->value), p->value.to_vector<double>(), p->grad.to_vector<double>());
  }
}

// The check above in training mode, then in eval mode with the running statistics the training passes left.
inline void gradcheck_cnn_on(Device device) {
  auto model = gradcheck_cnn(device);
  const Tensor x = Tensor::randn({3, 2, 9, 7}, 23, DType::F64).to(device);
  const Tensor labels = Tensor::from_vector<int64_t>({4, 0, 2}, {3}).to(device);
  for (bool training : {true, false}) {
    INFO("training " << training);
    model->train(training);
    gradcheck_cross_entropy(*model, x, labels);
  }
}

}  // namespace ember::test
