// The one way ember launches a kernel: exactly `kernel<<<grid, block, smem, stream>>>(args...)` under nvcc,
// the emulated device's launch (docs/emulation.md) when built with -DEMBER_CUDA=EMULATED.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "kernels/common.h"

#if EMBER_CUDA_EMULATED
#include "emu/launch.h"
#endif

namespace ember::kernels::cuda {

// `Kernel` is a template argument so the emulator knows which kernel it runs (its name for error
// reports); follow every launch with EMBER_LAUNCH_CHECK, as with <<<>>>.
template <auto Kernel, typename... Args>
inline void launch_kernel(dim3 grid, dim3 block, size_t shared_bytes, Stream stream, Args&&... args) {
#if EMBER_CUDA_EMULATED
  ::emu::launch<Kernel>(grid, block, shared_bytes, stream, std::forward<Args>(args)...);
#else
  Kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
#endif
}

}  // namespace ember::kernels::cuda
