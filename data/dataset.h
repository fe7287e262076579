// Fashion-MNIST in host memory: u8 images and int64 labels, loaded from Debian's IDX files.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace ember::data {

// Where Debian's dataset-fashion-mnist package installs the four IDX files.
inline constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// $EMBER_FASHION_MNIST_DIR when set (a staged copy, e.g. on the GPU check machine), else Debian's.
std::string default_fashion_mnist_dir();
inline constexpr int64_t kFashionMnistClasses = 10;
// Class names in label order (Zalando's).
extern const std::array<const char*, 10> kFashionMnistClassNames;

// A labelled image set in host memory. Tensors are handles: copying a Dataset shares the bytes.
struct Dataset {
  Tensor images;  // (N, H, W) uint8 on cpu, contiguous
  Tensor labels;  // (N) int64 on cpu, contiguous

  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
  int64_t sample_numel() const;  // H * W: bytes per image
  // Throws ValueError/ShapeError/DTypeError unless the invariants above hold (N >= 1).
  void check() const;
  // The first n samples (a view, no copy); n >= size() gives the whole set.
  Dataset head(int64_t n) const;
  // Part `index` of `count` contiguous parts of near-equal size (a view): a rank's share of an evaluation.
  Dataset shard(int64_t index, int64_t count) const;
};

enum class Split { Train, Test };
const char* split_name(Split split);  // "train", "test"

// Reads `<prefix>-images-idx3-ubyte[.gz]` and `<prefix>-labels-idx1-ubyte[.gz]` (prefix train or
// t10k) from `dir`, the .gz file first when both exist. Checks 28x28 images, labels 0..9 and equal
// counts; `limit` > 0 keeps the first `limit` samples, < 0 keeps all (0 is a ValueError).
// A missing directory or file is an IoError that names the path and the Debian package.
Dataset load_fashion_mnist(const std::string& dir = default_fashion_mnist_dir(), Split split = Split::Train,
                           int64_t limit = -1);

}  // namespace ember::data
