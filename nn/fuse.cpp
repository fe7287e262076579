// fuse(): finds the fusable pairs by their exact types, once, outside any forward or backward.
#include "nn/fuse.h"

#include <typeinfo>

#include "nn/activation.h"
#include "nn/batchnorm.h"
#include "nn/linear.h"
#include "nn/pool.h"

namespace ember::nn {

namespace {

// The fused module for child `first` followed by a ReLU, or null when the pair does not fuse.
std::shared_ptr<Module> fused_with_relu(Module& first) {
  // Exact types only: a LinearReLU is a Linear already fused, and a user's subclass may compute something else.
  if (typeid(first) == typeid(Linear)) return std::make_shared<LinearReLU>(static_cast<Linear&>(first));
  if (typeid(first) == typeid(BatchNorm2d)) return std::make_shared<BatchNormReLU>(static_cast<BatchNorm2d&>(first));
  return nullptr;
}

// Replaces child i with `fused`, which takes over its mode and whether it computes its input's gradient.
void put(Sequential& model, size_t i, std::shared_ptr<Module> fused) {
  fused->train(model[i].is_training());
  fused->set_input_grad(model[i].input_grad());
  model.replace(i, std::move(fused));
}

// Each BatchNormReLU followed by a MaxPool2d (Identity modules between, such as a fused ReLU's place) becomes a
// BatchNormReLUPool, and the pool's place an Identity.
int fuse_pools(Sequential& model) {
  int fused = 0;
  for (size_t i = 0; i < model.size(); ++i) {
    if (typeid(model[i]) != typeid(BatchNormReLU)) continue;
    size_t j = i + 1;
    while (j < model.size() && typeid(model[j]) == typeid(Identity)) ++j;
    if (j == model.size() || typeid(model[j]) != typeid(MaxPool2d)) continue;
    const ops::Pool2dParams pool = static_cast<MaxPool2d&>(model[j]).params();
    put(model, i, std::make_shared<BatchNormReLUPool>(static_cast<BatchNorm2d&>(model[i]), pool));
    model.replace(j, std::make_shared<Identity>());
    ++fused;
  }
  return fused;
}

}  // namespace

int fuse(Sequential& model) {
  int fused = 0;
  for (size_t i = 0; i + 1 < model.size(); ++i) {
    if (typeid(model[i + 1]) != typeid(ReLU)) continue;
    std::shared_ptr<Module> pair = fused_with_relu(model[i]);
    if (pair == nullptr) continue;
    put(model, i, std::move(pair));
    model.replace(i + 1, std::make_shared<Identity>());
    ++fused;
  }
  return fused + fuse_pools(model);
}

}  // namespace ember::nn
