// The networks `ember train --model mlp|cnn` builds, described by an Architecture, and reading either back
// from a checkpoint (ember's or PyTorch's) by the names and shapes of its tensors alone.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "nn/layers.h"

namespace ember::train {

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
  Shape batch_shape(int64_t batch) const;
  // The MLP's layer sizes {784, 256, 128, 10}; a CNN's features after the conv blocks, hidden, classes.
  std::vector<int64_t> linear_sizes() const;
  // "784-256-128-10" (MLP) or "1x28x28-c32-c64-128-10" (CNN; "k5" after the channels when kernel != 3).
  std::string str() const;
  void check() const;  // ValueError for sizes that cannot build (empty, non-positive, pooled away)
};

// nn.Sequential(Conv2d, BatchNorm2d, ReLU, MaxPool2d, ..., Flatten, Linear, ReLU, Dropout, ..., Linear) for a
// CNN, Linear/ReLU for an MLP, on `device` with weights drawn from `generator`. The CNN's Dropout layers keep
// drawing their masks from `generator`: it must outlive the model.
std::shared_ptr<nn::Sequential> make_model(const Architecture& arch, Device device = Device::cpu(),
                                           Generator& generator = default_generator());

// Writes the state_dict (parameters and BatchNorm buffers) with metadata {"format": "pt",
// "ember_architecture": arch.str()}, so PyTorch's load_state_dict(strict=True) takes it.
void save_network(const std::string& path, const nn::Module& model, const Architecture& arch);

struct Network {
  std::shared_ptr<nn::Sequential> model;
  Architecture arch;
};
// Reads a model.safetensors of either kind: 4-d weights make it a CNN, else an MLP. FormatError naming the
// file when the tensors do not form one of them. A file does not hold the dropout rate: `dropout` sets it,
// and the Dropout layers draw from `generator` (which must outlive the model).
Network load_network(const std::string& path, Device device = Device::cpu(), double dropout = 0.25,
                     Generator& generator = default_generator());

}  // namespace ember::train
