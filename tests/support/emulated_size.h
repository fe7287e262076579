// Sizes of the CUDA tests on the emulated device (docs/emulation.md, "Cost"): where a size only buys coverage a
// real GPU needs (a full grid, thousands of blocks), the emulated build, whose every GPU thread is a fiber on
// the CPU, takes a smaller one that still spans several blocks and leaves a partial last one.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace ember::test {

constexpr int64_t gpu_or_emulated(int64_t on_gpu, int64_t emulated) {
  return ember::cuda::is_emulated() ? emulated : on_gpu;
}

}  // namespace ember::test
