// CPU twins of the random kernels on the Philox stream (kernels/philox.h). uniform and dropout_mask run on the host
// pool in kElementwiseGrain chunks and draw their words in runs (philox_words.h: one Philox evaluation per 4 words);
// element i still reads word offset + i, so the cut and the threads change no bit.
#include "kernels/random.h"

#include <bit>
#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/philox_words.h"
#include "kernels/cpu/vecmath.h"
#include "kernels/philox.h"

namespace ember::kernels::cpu {

namespace {

template <typename T> T uniform_of(uint32_t bits) {
  if constexpr (sizeof(T) == 4) return uniform_float(bits);
  else return uniform_double(bits);
}

// Calls fn(first, count, words) over [0, n) in runs, words[e] = philox_word(seed, offset + first + e), on the pool
// in fixed chunks.
template <typename F> void for_each_run(int64_t n, uint64_t seed, uint64_t offset, F&& fn, const char* site) {
  parallel_chunks(
      n, kElementwiseGrain,
      [&](int64_t begin, int64_t end) {
        constexpr int64_t kRun = 256;
        uint32_t words[kRun];
        for (int64_t run = begin; run < end; run += kRun) {
          const int64_t count = end - run < kRun ? end - run : kRun;
          philox_words(seed, offset + static_cast<uint64_t>(run), count, words);
          fn(run, count, static_cast<const uint32_t*>(words));
        }
      },
      site);
}

}  // namespace

template <typename T>
void uniform(T* out, int64_t n, uint64_t seed, uint64_t offset, T low, T high) {
  const T span = high - low;
  for_each_run(
      n, seed, offset,
      [&](int64_t first, int64_t count, const uint32_t* words) {
        for (int64_t e = 0; e < count; ++e) out[first + e] = low + span * uniform_of<T>(words[e]);
      },
      "uniform");
}

template <typename T>
void normal(T* out, int64_t n, uint64_t seed, uint64_t offset, T mean, T std) {
  // Box-Muller on the word pair (2i, 2i+1); computed in double so host and device agree to rounding.
  for (int64_t i = 0; i < n; ++i) {
    uint64_t k = offset + 2 * static_cast<uint64_t>(i);
    double u1 = 1.0 - uniform_double(philox_word(seed, k));  // (0, 1]: log is finite
    double u2 = uniform_double(philox_word(seed, k + 1));
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    out[i] = static_cast<T>(mean + std * z);
  }
}

template <typename T>
void dropout_mask(T* mask, int64_t n, uint64_t seed, uint64_t offset, T p) {
  const T keep_scale = T(1) / (T(1) - p);
  for_each_run(
      n, seed, offset,
      [&](int64_t first, int64_t count, const uint32_t* words) {
        T* m = mask + first;
        int64_t e = 0;
        if constexpr (sizeof(T) == 4) {  // uniform_float 4 lanes at a time: the same exact values, the same compare
          using vecmath::f32x4, vecmath::i32x4;
          for (; e + 4 <= count; e += 4) {
            vecmath::u32x4 bits;
            __builtin_memcpy(&bits, words + e, sizeof bits);
            const f32x4 u = __builtin_convertvector(std::bit_cast<i32x4>(bits >> 8), f32x4) * (1.0f / 16777216.0f);
            vecmath::store4(m + e, u >= p ? f32x4{} + keep_scale : f32x4{});
          }
        }
        for (; e < count; ++e) m[e] = uniform_of<T>(words[e]) >= p ? keep_scale : T(0);
      },
      "dropout_mask");
}

#define EMBER_INSTANTIATE(T)                                              \
  template void uniform<T>(T*, int64_t, uint64_t, uint64_t, T, T);        \
  template void normal<T>(T*, int64_t, uint64_t, uint64_t, T, T);         \
  template void dropout_mask<T>(T*, int64_t, uint64_t, uint64_t, T);
EMBER_INSTANTIATE(float)
EMBER_INSTANTIATE(double)
#undef EMBER_INSTANTIATE

}  // namespace ember::kernels::cpu
