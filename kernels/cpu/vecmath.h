// Host-only float exp and erf as straight-line arithmetic with selects, written once for a scalar float and for
// gcc's 4-lane vector type (f32x4): plain loops calling libm, or these with float compares, do not vectorise under
// the default -ftrapping-math, so the kernels' hot loops call the f32x4 forms on 4 elements at a time and the
// scalar forms (the same operations, the same bits) on the tail. double keeps libm. Accuracy and extremes against
// libm: tests/kernels/test_vecmath.cpp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace ember::kernels::cpu::vecmath {

using f32x4 = float __attribute__((vector_size(16)));
using i32x4 = int32_t __attribute__((vector_size(16)));
using u32x4 = uint32_t __attribute__((vector_size(16)));

template <typename F> struct Bits;
template <> struct Bits<float> { using I = int32_t; using U = uint32_t; };
template <> struct Bits<f32x4> { using I = i32x4; using U = u32x4; };

// Loads and stores of 4 floats at any alignment.
inline f32x4 load4(const float* p) {
  f32x4 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, f32x4 v) { __builtin_memcpy(p, &v, sizeof v); }

template <typename F> inline F abs(F x) {
  using U = typename Bits<F>::U;
  return std::bit_cast<F>(std::bit_cast<U>(x) & 0x7FFFFFFFu);
}
// |magnitude| with the sign of `sign`.
template <typename F> inline F copysign(F magnitude, F sign) {
  using U = typename Bits<F>::U;
  return std::bit_cast<F>((std::bit_cast<U>(magnitude) & 0x7FFFFFFFu) | (std::bit_cast<U>(sign) & 0x80000000u));
}

// exp(x), within 1 ulp of libm's expf over the whole range: x = n ln2 + r, |r| <= ln2 / 2, exp(r) by Cephes'
// polynomial, 2^n applied as two halves so that n in [-150, 129] needs no special case. exp(-inf) and anything
// below -104 give +0, above 88.72 (and +inf) give +inf, NaN stays NaN (it passes both clamps: compares are false).
template <typename F> inline F exp(F x) {
  using I = typename Bits<F>::I;
  using U = typename Bits<F>::U;
  const F lowest = F{} + -104.0f, highest = F{} + 89.0f;
  F xc = x < lowest ? lowest : x;
  xc = xc > highest ? highest : xc;
  // n = round(x / ln2) by the 1.5 * 2^23 trick: the sum's low mantissa bits hold n.
  const F shifted = xc * 1.44269504088896341f + 12582912.0f;
  const F n = shifted - 12582912.0f;
  const I ni = std::bit_cast<I>(shifted) - 0x4B400000;
  F r = xc - n * 0.693359375f;  // ln2 in two parts: n * 0.693359375 is exact for |n| < 2^15
  r = r - n * -2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const I n1 = ni >> 1, n2 = ni - n1;  // both halves keep a normal exponent
  const F s1 = std::bit_cast<F>(std::bit_cast<U>(n1 + 127) << 23);
  const F s2 = std::bit_cast<F>(std::bit_cast<U>(n2 + 127) << 23);
  const F y = p * s1 * s2;
  return x < lowest ? F{} : y;
}
inline double exp(double x) { return std::exp(x); }

// erf(x), within 3 ulp of libm's erff: |x| < 0.921875 by x P(x^2) (degree 6), beyond by 1 - exp(Q(|x|)) with Q a
// degree-8 fit of log(erfc(t)) on [0.921875, 4] (erfc(4) is below half an ulp of 1, so |x| > 4 is evaluated at 4
// and rounds to +-1). Both branches are computed and one selected. NaN stays NaN. Coefficients: least-squares
// fits on Chebyshev nodes against mpmath (relative errors 5e-10 and 1.3e-8 before float rounding).
template <typename F> inline F erf(F x) {
  const F s = x * x;
  F p = F{} + 8.411063973415984e-05f;
  p = p * s + -0.0008153790876361319f;
  p = p * s + 0.005202176953928238f;
  p = p * s + -0.02685995771523901f;
  p = p * s + 0.11283708439123574f;
  p = p * s + -0.3761263494359016f;
  p = p * s + 1.1283791669006578f;
  const F small = x * p;
  const F a = abs(x), four = F{} + 4.0f;
  const F t = a > four ? four : a;
  F q = F{} + 1.613101903675278e-06f;
  q = q * t + -4.557118476180177e-05f;
  q = q * t + 0.0005926017199949955f;
  q = q * t + -0.0047394176880949865f;
  q = q * t + 0.02636238020234451f;
  q = q * t + -0.10997404647197834f;
  q = q * t + -0.6319416357860543f;
  q = q * t + -1.1301639783781505f;
  q = q * t + 0.00030254181770265535f;
  const F large = copysign(1.0f - exp(q), x);
  return a < F{} + 0.921875f ? small : large;
}
inline double erf(double x) { return std::erf(x); }

}  // namespace ember::kernels::cpu::vecmath
