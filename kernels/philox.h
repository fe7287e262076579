// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): a counter-based
// generator compiled for host and device alike, so value i of a stream is the same on cpu and cuda.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define EMBER_HD __host__ __device__ __forceinline__
#else
#define EMBER_HD inline
#endif

namespace ember::kernels {

struct Philox4 {
  uint32_t v[4];
};

EMBER_HD uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  return static_cast<uint32_t>(product);
}

// Four 32-bit random words for the 128-bit counter (counter, 0) under the 64-bit key `seed`.
EMBER_HD Philox4 philox4x32_10(uint64_t counter, uint64_t seed) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo32(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = mulhilo32(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// The i-th 32-bit word of the stream (seed, i): word i comes from counter i / 4, lane i % 4.
EMBER_HD uint32_t philox_word(uint64_t seed, uint64_t i) { return philox4x32_10(i >> 2, seed).v[i & 3]; }

// Uniform in [0, 1) from 24 (float) or 32 (double) random bits: exact in both types, so the
// float result is bitwise identical on host and device.
EMBER_HD float uniform_float(uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }
EMBER_HD double uniform_double(uint32_t bits) { return static_cast<double>(bits) * (1.0 / 4294967296.0); }

}  // namespace ember::kernels
