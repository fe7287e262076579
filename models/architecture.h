// The networks `ember train --model mlp|cnn` builds, each described by an Architecture: its sizes, the shape of
// one sample it takes, its name ("784-256-128-10", "1x28x28-c32-c64-128-10") and the nn modules it is made of.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "nn/container.h"

namespace ember::models {

struct Architecture {
  std::string kind = "mlp";             // mlp | cnn
  int64_t in_channels = 1, height = 28, width = 28;
  std::vector<int64_t> channels;        // cnn: one block per entry (conv k x k pad k/2, BN, ReLU, maxpool 2)
  int64_t kernel = 3;                   // cnn: the conv kernel size (odd)
  std::vector<int64_t> hidden;          // hidden Linear sizes (each followed by ReLU, then Dropout in a cnn)
  double dropout = 0.25;                // cnn: after each hidden Linear (nothing to do in eval)
  int64_t classes = 10;

  static Architecture mlp(std::vector<int64_t> hidden);
  static Architecture cnn(std::vector<int64_t> channels, std::vector<int64_t> hidden);
  bool is_cnn() const { return kind == "cnn"; }
  // One sample as the model takes it: (C*H*W) for an MLP, (C, H, W) for a CNN.
  Shape sample_shape() const;
  // (batch, *sample_shape()): the one place a batch's shape is decided (the data loader yields it).
  Shape batch_shape(int64_t batch) const;
  // The MLP's layer sizes {784, 256, 128, 10}; a CNN's features after the conv blocks, hidden, classes.
  std::vector<int64_t> linear_sizes() const;
  // "784-256-128-10" (MLP) or "1x28x28-c32-c64-128-10" (CNN; "k5" after the channels when kernel != 3).
  std::string str() const;
  void check() const;  // ValueError for sizes that cannot build (empty, non-positive, pooled away)
};

// nn.Sequential(Conv2d, BatchNorm2d+ReLU, MaxPool2d, ..., Flatten, Linear+ReLU, Dropout, ..., Linear) for a CNN,
// Linear+ReLU, ..., Linear for an MLP (the fused pairs of nn/, under PyTorch's state_dict names), on `device`
// with weights drawn from `generator`. The CNN's Dropout layers keep drawing their masks from `generator`: it
// must outlive the model.
std::shared_ptr<nn::Sequential> make_model(const Architecture& arch, Device device = Device::cpu(),
                                           Generator& generator = default_generator());

}  // namespace ember::models
