// Random fill kernels on ember's Philox stream: value i of (seed, offset) uses stream words at
// offset + i (uniform) or offset + 2i, 2i+1 (normal, Box-Muller), identically on cpu and cuda.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

namespace cpu {
template <typename T> void uniform(T* out, int64_t n, uint64_t seed, uint64_t offset, T low, T high);
template <typename T> void normal(T* out, int64_t n, uint64_t seed, uint64_t offset, T mean, T std);
// Dropout mask: mask[i] = 1 / (1 - p) if uniform_i >= p else 0.
template <typename T> void dropout_mask(T* mask, int64_t n, uint64_t seed, uint64_t offset, T p);
}  // namespace cpu

namespace cuda {
template <typename T> void uniform(T* out, int64_t n, uint64_t seed, uint64_t offset, T low, T high, Stream stream);
template <typename T> void normal(T* out, int64_t n, uint64_t seed, uint64_t offset, T mean, T std, Stream stream);
template <typename T> void dropout_mask(T* mask, int64_t n, uint64_t seed, uint64_t offset, T p, Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
