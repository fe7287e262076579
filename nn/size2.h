// Size2: a kernel size, stride or padding of a 2-d layer, one number for both dims (3) or {height, width}.
#pragma once

#include <cstdint>

namespace ember::nn {

struct Size2 {
  int64_t h, w;
  Size2(int64_t both) : h(both), w(both) {}  // NOLINT: implicit, as PyTorch takes an int or a pair
  Size2(int64_t height, int64_t width) : h(height), w(width) {}
};

}  // namespace ember::nn
