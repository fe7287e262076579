// Test inputs shared by the kernel tests: seeded random arrays, NaN-filled outputs, and the
// tolerance of a floating reduction by element type.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "support/compare.h"

namespace ember::test {

template <typename T>
std::vector<T> random_values(int64_t n, unsigned seed, double lo, double hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& e : v) e = static_cast<T>(dist(gen));
  return v;
}

// Outputs start as NaN so an element a kernel forgets to write fails the comparison.
template <typename T>
std::vector<T> nans(int64_t n) {
  return std::vector<T>(static_cast<size_t>(n), std::numeric_limits<T>::quiet_NaN());
}

template <typename T>
Tolerance reduce_tolerance() {
  if constexpr (std::is_same_v<T, float>) return kF32Reduce;
  else return kF64;
}

// Elementwise kernels (optimizer updates): the plain tolerance of the element type.
template <typename T>
constexpr Tolerance tolerance_for() {
  return sizeof(T) == 4 ? kF32 : kF64;
}

// GEMM's error grows with the reduction length K in float; float64 stays tight.
template <typename T>
Tolerance gemm_tolerance(int64_t K) {
  if constexpr (std::is_same_v<T, float>) return gemm_f32(K);
  else return kF64;
}

}  // namespace ember::test
