// The host-only fast paths under the kernels: vecmath's float exp and erf against libm over a dense sweep of all
// floats (every 97th bit pattern, plus the extremes: +-0, +-inf, NaN, underflow and overflow edges), its vector
// lanes bit for bit its scalar form; philox_words against philox_word (any start, any length, counters past
// 2^32); dropout_mask across chunk edges against philox_word at 1 and 2 threads.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/philox_words.h"
#include "kernels/cpu/vecmath.h"
#include "kernels/philox.h"
#include "kernels/random.h"
#include "support/threads.h"

using namespace ember;
namespace vm = kernels::cpu::vecmath;

namespace {

// Distance in units in the last place (floats ordered by their bits); 0 for two NaNs, huge for NaN against a number.
int64_t ulps(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : int64_t{1} << 40;
  if (a == b) return 0;
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  const int64_t oa = ia < 0 ? int64_t{INT32_MIN} - ia : ia, ob = ib < 0 ? int64_t{INT32_MIN} - ib : ib;
  return oa > ob ? oa - ob : ob - oa;
}

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

std::vector<float> sweep() {
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 97) x.push_back(from_bits(static_cast<uint32_t>(bits)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), -104.0f, -103.9f, -87.34f,
                  -87.33f, 88.72f, 88.73f, 89.0f, 1e-45f, -1e-45f, 0.921875f, -0.921875f, 0.9218749f, 3.99f, 4.0f,
                  4.01f, -4.0f, 1e30f, -1e30f})
    x.push_back(v);
  while (x.size() % 4 != 0) x.push_back(1.0f);
  return x;
}

// Runs f's vector form on 4 lanes at a time and checks every lane equals f's scalar form, bit for bit.
template <typename V, typename S> std::vector<float> vector_lanes(const std::vector<float>& x, V vf, S sf) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); i += 4) vm::store4(y.data() + i, vf(vm::load4(x.data() + i)));
  for (size_t i = 0; i < x.size(); ++i)
    if (ulps(y[i], sf(x[i])) != 0) FAIL("lane and scalar differ at x = " << x[i]);
  return y;
}

}  // namespace

TEST_CASE("vecmath::exp is within 1 ulp of expf over the float range, 0 below -104, inf above 88.72, NaN kept",
          "[kernels][vecmath]") {
  const std::vector<float> x = sweep();
  const std::vector<float> y =
      vector_lanes(x, [](vm::f32x4 v) { return vm::exp(v); }, [](float v) { return vm::exp(v); });
  int64_t worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp(x[i]);
    if (want != 0 && std::fabs(want) < std::numeric_limits<float>::min()) {  // libm's subnormal results
      REQUIRE(std::fabs(y[i] - want) <= 2 * std::numeric_limits<float>::denorm_min());
      continue;
    }
    const int64_t d = ulps(y[i], want);
    if (d > worst) worst = d, worst_x = x[i];
  }
  INFO("worst at x = " << worst_x);
  CHECK(worst <= 1);
  CHECK(vm::exp(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(vm::exp(-1e30f) == 0.0f);
  CHECK(vm::exp(0.0f) == 1.0f);
  CHECK(std::isinf(vm::exp(88.73f)));
  CHECK(std::isinf(vm::exp(std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(vm::exp(std::numeric_limits<float>::quiet_NaN())));
  CHECK(vm::exp(1.0) == std::exp(1.0));  // double is libm's
}

TEST_CASE("vecmath::erf is within 3 ulp of erff over the float range, +-1 beyond 4, odd, NaN kept",
          "[kernels][vecmath]") {
  const std::vector<float> x = sweep();
  const std::vector<float> y =
      vector_lanes(x, [](vm::f32x4 v) { return vm::erf(v); }, [](float v) { return vm::erf(v); });
  int64_t worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t d = ulps(y[i], std::erf(x[i]));
    if (d > worst) worst = d, worst_x = x[i];
    if (!std::isnan(x[i])) REQUIRE(ulps(vm::erf(-x[i]), -y[i]) == 0);
  }
  INFO("worst at x = " << worst_x);
  CHECK(worst <= 3);
  CHECK(vm::erf(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(vm::erf(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(vm::erf(5.0f) == 1.0f);
  CHECK(std::signbit(vm::erf(-0.0f)));
  CHECK(std::isnan(vm::erf(std::numeric_limits<float>::quiet_NaN())));
  CHECK(vm::erf(0.5) == std::erf(0.5));  // double is libm's
}

TEST_CASE("philox_words gives philox_word's words for any start and length", "[kernels][random]") {
  const uint64_t seed = 0x123456789ABCDEF0ull;
  for (uint64_t first : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{4}, uint64_t{30}, uint64_t{33},
                         (uint64_t{1} << 34) - 5, ~uint64_t{0} - 1100}) {
    for (int64_t n : {1, 2, 3, 5, 17, 31, 32, 33, 289, 1000}) {
      INFO("first " << first << " n " << n);
      std::vector<uint32_t> words(static_cast<size_t>(n) + 1, 0xDEADBEEFu);
      kernels::cpu::philox_words(seed, first, n, words.data());
      for (int64_t e = 0; e < n; ++e) REQUIRE(words[e] == kernels::philox_word(seed, first + static_cast<uint64_t>(e)));
      REQUIRE(words[n] == 0xDEADBEEFu);  // nothing written past n
    }
  }
}

TEST_CASE("cpu dropout_mask across chunk edges is philox_word's mask, the same bits at 1 and 2 threads",
          "[kernels][random]") {
  const int64_t n = 3 * 8192 + 7;  // three chunks of the host pool and a tail
  for (uint64_t offset : {uint64_t{0}, uint64_t{5}, (uint64_t{1} << 34) + 3}) {
    INFO("offset " << offset);
    auto run = [&](int threads) {
      test::ThreadsScope scope(threads);
      std::vector<float> mask(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
      kernels::cpu::dropout_mask(mask.data(), n, 99, offset, 0.1f);
      return mask;
    };
    const std::vector<float> one = run(1);
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = kernels::uniform_float(kernels::philox_word(99, offset + static_cast<uint64_t>(i))) >= 0.1f;
      REQUIRE(one[i] == (keep ? 1.0f / (1.0f - 0.1f) : 0.0f));
    }
    CHECK(one == run(2));
  }
}
