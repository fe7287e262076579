// The networks `ember train --model mlp|cnn|vit` builds, each described by an Architecture: its sizes, the shape of
// one sample it takes, its name ("784-256-128-10", "1x28x28-c32-c64-128-10") and the nn modules it is made of.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "nn/container.h"

namespace ember::models {

struct Architecture {
  std::string kind = "mlp";             // mlp | cnn | vit | bert
  int64_t in_channels = 1, height = 28, width = 28;
  std::vector<int64_t> channels;        // cnn: one block per entry (conv k x k pad k/2, BN, ReLU, maxpool 2)
  int64_t kernel = 3;                   // cnn: the conv kernel size (odd)
  std::vector<int64_t> hidden;          // hidden Linear sizes (each followed by ReLU, then Dropout in a cnn)
  double dropout = 0.25;                // cnn: after each hidden Linear; vit: in every encoder layer
  int64_t classes = 10;
  // vit (models/vit.h): patch size, width, encoder layers, heads, feed-forward width, input normalisation.
  int64_t patch = 7, dim = 64, depth = 4, heads = 4, feedforward = 128;
  double input_mean = 0.2860, input_std = 0.3530;  // Fashion-MNIST's, as the peer normalises
  // bert (models/bert.h): the position table's length, the longest window the model reads; classes is the
  // vocabulary (256 bytes + [MASK]).
  int64_t seq_len = 64;

  static Architecture mlp(std::vector<int64_t> hidden);
  static Architecture cnn(std::vector<int64_t> channels, std::vector<int64_t> hidden);
  static Architecture vit(int64_t patch, int64_t dim, int64_t depth, int64_t heads, int64_t feedforward);
  static Architecture bert(int64_t seq_len, int64_t dim, int64_t depth, int64_t heads, int64_t feedforward);
  bool is_cnn() const { return kind == "cnn"; }
  bool is_vit() const { return kind == "vit"; }
  bool is_bert() const { return kind == "bert"; }  // the one that reads text (byte ids), not images
  // vit: the patches of one image, and the values in one patch.
  int64_t patches() const { return (height / patch) * (width / patch); }
  int64_t patch_features() const { return in_channels * patch * patch; }
  // "MLP", "CNN", "ViT" or "BERT".
  std::string family() const;
  // One sample as the model takes it: (C*H*W) for an MLP, (C, H, W) for a CNN or a ViT, (seq_len) byte ids for BERT.
  Shape sample_shape() const;
  // (batch, *sample_shape()): the one place a batch's shape is decided (the data loader yields it).
  Shape batch_shape(int64_t batch) const;
  // The MLP's layer sizes {784, 256, 128, 10}; a CNN's features after the conv blocks, hidden, classes.
  std::vector<int64_t> linear_sizes() const;
  // "784-256-128-10" (MLP), "1x28x28-c32-c64-128-10" (CNN; "k5" after the channels when kernel != 3) or
  // "1x28x28-p7-d64-l4-h4-f128-10" (ViT: patch, width, layers, heads, feed-forward) or "t64-d128-l4-h4-f512-257"
  // (BERT: position table, width, layers, heads, feed-forward, vocabulary).
  std::string str() const;
  void check() const;  // ValueError for sizes that cannot build (empty, non-positive, pooled away)
};

// nn.Sequential(Conv2d, BatchNorm2d+ReLU+MaxPool2d, ..., Flatten, Linear+ReLU, Dropout, ..., Linear) for a CNN,
// Linear+ReLU, ..., Linear for an MLP (the fused pairs of nn/, under PyTorch's state_dict names), a
// VisionTransformer (models/vit.h) for a ViT, on `device` with weights drawn from `generator`. Dropout layers keep
// drawing their masks from `generator`: it must outlive the model.
std::shared_ptr<nn::Module> make_model(const Architecture& arch, Device device = Device::cpu(),
                                       Generator& generator = default_generator());

}  // namespace ember::models
