// fuse(): finds the fusable pairs by their exact types, once, outside any forward or backward.
#include "nn/fuse.h"

#include <typeinfo>

#include "nn/activation.h"
#include "nn/batchnorm.h"
#include "nn/linear.h"

namespace ember::nn {

namespace {

// The fused module for child `first` followed by a ReLU, or null when the pair does not fuse.
std::shared_ptr<Module> fused_with_relu(Module& first) {
  // Exact types only: a LinearReLU is a Linear already fused, and a user's subclass may compute something else.
  if (typeid(first) == typeid(Linear)) return std::make_shared<LinearReLU>(static_cast<Linear&>(first));
  if (typeid(first) == typeid(BatchNorm2d)) return std::make_shared<BatchNormReLU>(static_cast<BatchNorm2d&>(first));
  return nullptr;
}

}  // namespace

int fuse(Sequential& model) {
  int fused = 0;
  for (size_t i = 0; i + 1 < model.size(); ++i) {
    if (typeid(model[i + 1]) != typeid(ReLU)) continue;
    std::shared_ptr<Module> pair = fused_with_relu(model[i]);
    if (pair == nullptr) continue;
    pair->train(model[i].is_training());
    pair->set_input_grad(model[i].input_grad());
    model.replace(i, std::move(pair));
    model.replace(i + 1, std::make_shared<Identity>());
    ++fused;
  }
  return fused;
}

}  // namespace ember::nn
