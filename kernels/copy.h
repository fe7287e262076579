// Copy kernels: gather a strided view into contiguous memory, and cast between dtypes
// (u8 -> f32 with a scale for images).
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace ember::kernels {

constexpr int kMaxDims = 8;

// A strided view: element (i0, ..., ik) is at offset sum(i_d * strides[d]) from the base pointer.
struct StridedLayout {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};

namespace cpu {
// dst[i] = src[offset of the i-th element of `layout` in row-major order], for n = numel(layout).
template <typename T> void strided_copy(const T* src, StridedLayout layout, T* dst, int64_t n);
// dst[i] = Dst(src[i] * scale); scale == 1 is an exact cast.
template <typename Src, typename Dst> void cast(const Src* src, Dst* dst, int64_t n, double scale);
}  // namespace cpu

namespace cuda {
template <typename T> void strided_copy(const T* src, StridedLayout layout, T* dst, int64_t n, Stream stream);
template <typename Src, typename Dst> void cast(const Src* src, Dst* dst, int64_t n, double scale, Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
