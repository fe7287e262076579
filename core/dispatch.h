// core-internal: the one place an op chooses its backend, and the CUDA stream it runs on.
#pragma once

#include "core/cuda_runtime.h"
#include "core/device.h"
#include "base/error.h"

// EMBER_CUDA_CALL(expr) evaluates a kernels::cuda call; without the CUDA backend it throws (no
// CUDA tensor can exist then, so this is unreachable in practice).
#if EMBER_HAS_CUDA
#define EMBER_CUDA_CALL(...) __VA_ARGS__
#else
#define EMBER_CUDA_CALL(...) ::ember::cuda::require(::ember::Device::cuda(0))
#endif

namespace ember::detail {

inline kernels::Stream stream_of(Device device) { return cuda::runtime::compute_stream(device.index); }

}  // namespace ember::detail
