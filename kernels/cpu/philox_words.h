// Host-only: runs of consecutive Philox stream words (kernels/philox.h), one philox4x32_10 evaluation per 4 words
// instead of philox_word's one per word, 4 counters at a time in SSE2 lanes (x86-64's baseline; elsewhere one
// counter at a time). Word i of the stream is exactly philox_word(seed, i) (tests/kernels/test_vecmath.cpp), so
// the host's dropout masks stay bit for bit the device's.
#pragma once

#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/philox.h"

namespace ember::kernels::cpu {

inline constexpr int kPhiloxBlockCounters = 8;
inline constexpr int kPhiloxBlockWords = 4 * kPhiloxBlockCounters;

#if defined(__SSE2__)
namespace philox_detail {
// hi and lo halves of a * b for 4 lanes of 32 bits (SSE2's pmuludq multiplies lanes 0 and 2; lanes 1 and 3 are
// shifted down and multiplied likewise).
inline void mulhilo4(__m128i a, __m128i b, __m128i* hi, __m128i* lo) {
  const __m128i even = _mm_mul_epu32(a, b);                                         // lo0 hi0 lo2 hi2
  const __m128i odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), _mm_srli_epi64(b, 32));  // lo1 hi1 lo3 hi3
  *lo = _mm_unpacklo_epi32(_mm_shuffle_epi32(even, _MM_SHUFFLE(0, 0, 2, 0)),
                           _mm_shuffle_epi32(odd, _MM_SHUFFLE(0, 0, 2, 0)));
  *hi = _mm_unpacklo_epi32(_mm_shuffle_epi32(even, _MM_SHUFFLE(0, 0, 3, 1)),
                           _mm_shuffle_epi32(odd, _MM_SHUFFLE(0, 0, 3, 1)));
}

// philox4x32_10 of the 4 counters first .. first + 3; words[4 c + lane] = philox4x32_10(first + c).v[lane].
inline void philox4(uint64_t seed, uint64_t first, uint32_t* words) {
  uint32_t lo[4], hi[4];
  for (int l = 0; l < 4; ++l) {
    const uint64_t counter = first + static_cast<uint64_t>(l);
    lo[l] = static_cast<uint32_t>(counter);
    hi[l] = static_cast<uint32_t>(counter >> 32);
  }
  __m128i c0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
  __m128i c1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi));
  __m128i c2 = _mm_setzero_si128(), c3 = _mm_setzero_si128();
  const __m128i m0 = _mm_set1_epi32(static_cast<int>(0xD2511F53u)), m1 = _mm_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {  // philox4x32_10's round on 4 counters at once
    __m128i hi0, lo0, hi1, lo1;
    mulhilo4(m0, c0, &hi0, &lo0);
    mulhilo4(m1, c2, &hi1, &lo1);
    const __m128i n0 = _mm_xor_si128(_mm_xor_si128(hi1, c1), _mm_set1_epi32(static_cast<int>(k0)));
    const __m128i n2 = _mm_xor_si128(_mm_xor_si128(hi0, c3), _mm_set1_epi32(static_cast<int>(k1)));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Transpose: counter c's 4 words next to each other.
  const __m128i t0 = _mm_unpacklo_epi32(c0, c1), t1 = _mm_unpacklo_epi32(c2, c3);  // c0[0] c1[0] c0[1] c1[1], ...
  const __m128i t2 = _mm_unpackhi_epi32(c0, c1), t3 = _mm_unpackhi_epi32(c2, c3);
  __m128i* out = reinterpret_cast<__m128i*>(words);
  _mm_storeu_si128(out + 0, _mm_unpacklo_epi64(t0, t1));
  _mm_storeu_si128(out + 1, _mm_unpackhi_epi64(t0, t1));
  _mm_storeu_si128(out + 2, _mm_unpacklo_epi64(t2, t3));
  _mm_storeu_si128(out + 3, _mm_unpackhi_epi64(t2, t3));
}
}  // namespace philox_detail
#endif

// The 32 words of counters first_counter .. first_counter + 7: words[4 c + lane] = philox4x32_10(first + c).v[lane].
inline void philox_block(uint64_t seed, uint64_t first_counter, uint32_t* words) {
#if defined(__SSE2__)
  for (int c = 0; c < kPhiloxBlockCounters; c += 4)
    philox_detail::philox4(seed, first_counter + static_cast<uint64_t>(c), words + 4 * c);
#else
  for (int c = 0; c < kPhiloxBlockCounters; ++c) {
    const Philox4 r = philox4x32_10(first_counter + static_cast<uint64_t>(c), seed);
    for (int lane = 0; lane < 4; ++lane) words[4 * c + lane] = r.v[lane];
  }
#endif
}

// words[e] = philox_word(seed, first + e) for e in [0, n).
inline void philox_words(uint64_t seed, uint64_t first, int64_t n, uint32_t* words) {
  uint32_t block[kPhiloxBlockWords];
  int64_t e = 0;
  while (e < n) {
    const uint64_t index = first + static_cast<uint64_t>(e);
    const uint64_t block_first = index & ~static_cast<uint64_t>(3);  // the block starts at index's counter
    philox_block(seed, block_first >> 2, block);
    const int64_t skip = static_cast<int64_t>(index - block_first);
    const int64_t take = n - e < kPhiloxBlockWords - skip ? n - e : kPhiloxBlockWords - skip;
    for (int64_t w = 0; w < take; ++w) words[e + w] = block[skip + w];
    e += take;
  }
}

}  // namespace ember::kernels::cpu
