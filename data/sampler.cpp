// epoch_permutation: Fisher-Yates over ember's counter-based generator, unbiased and the same everywhere.
#include "data/sampler.h"

#include <bit>
#include <numeric>
#include <utility>

#include "base/error.h"
#include "core/generator.h"

namespace ember::data {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// 64-bit draws from Philox4x32-10 under a key mixed from (seed, epoch).
class EpochRandom {
 public:
  EpochRandom(uint64_t seed, int64_t epoch) : key_(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch)))) {}
  // Uniform in [0, bound) for bound >= 1: rejection on a power-of-two mask, unbiased and fully
  // specified (std::uniform_int_distribution is implementation-defined).
  uint64_t below(uint64_t bound) {
    const uint64_t mask = std::bit_ceil(bound) - 1;
    uint64_t r;
    do r = philox_bits(key_, counter_++) & mask;
    while (r >= bound);
    return r;
  }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

}  // namespace

void epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, std::vector<int64_t>& order) {
  EMBER_CHECK(n >= 0, ValueError, "epoch_permutation(): n must be >= 0, got ", n);
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  EpochRandom random(seed, epoch);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(random.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
}

}  // namespace ember::data
