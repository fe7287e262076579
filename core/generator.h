// Generator: a (seed, offset) position on ember's Philox stream. Each draw reserves a range of the
// stream, so the same seed and the same sequence of draws give the same numbers on cpu and cuda.
#pragma once

#include <cstdint>

namespace ember {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed) { seed_ = seed, offset_ = 0; }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed, offset_ = offset; }
  // Returns the offset at which `count` stream words start, and moves past them.
  uint64_t reserve(uint64_t count) {
    uint64_t start = offset_;
    offset_ += count;
    return start;
  }

 private:
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

// 64 random bits: the first two words of the Philox4x32-10 block at `counter` under `key`, the stream the random
// kernels draw from, for host code that makes draws of its own (the data loader's epoch order).
uint64_t philox_bits(uint64_t key, uint64_t counter);

// The process-wide generator that layer initialisation and dropout draw from by default.
Generator& default_generator();
inline void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace ember
