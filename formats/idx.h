// IDX (MNIST-format) reader for untrusted files, raw or gzip: every field is validated before use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace ember::formats {

// The two IDX files MNIST-style datasets ship: magic 0x00000803 (u8, 3 dims) and 0x00000801 (u8, 1 dim).
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;
// Sanity cap on the number of samples: Fashion-MNIST has 70000; 10M keeps a forged header from
// asking for an absurd allocation.
inline constexpr int64_t kIdxMaxCount = 10'000'000;
// deflate expands at most ~1032x; a gzip file whose declared payload exceeds this factor times
// its compressed size is truncated or forged, and is rejected before anything is allocated.
inline constexpr int64_t kDeflateMaxRatio = 1032;

// What a caller accepts. rows/cols 0 accept any size (> 0); the payload size is still checked
// with overflow-checked arithmetic against what the file can hold.
struct IdxImageSpec {
  int64_t rows = 28;
  int64_t cols = 28;
  int64_t max_count = kIdxMaxCount;
};

struct IdxLabelSpec {
  int64_t num_classes = 10;  // every label must be in [0, num_classes)
  int64_t max_count = kIdxMaxCount;
};

// Reads an IDX images file (gzip detected by its magic bytes 1f 8b, else raw): (N, rows, cols)
// uint8 on cpu. Throws IoError when the file cannot be opened or read, FormatError (one line:
// file, offset or field, expected vs found) on any malformed content; rejects before allocating
// when the declared size cannot fit the file.
Tensor read_idx_images(const std::string& path, const IdxImageSpec& spec = {});
// Reads an IDX labels file: (N) int64 on cpu, each in [0, num_classes).
Tensor read_idx_labels(const std::string& path, const IdxLabelSpec& spec = {});

// The same from bytes in memory (fuzzing harnesses, tests); `name` stands for the file in messages.
Tensor parse_idx_images(const void* data, size_t size, const std::string& name, const IdxImageSpec& spec = {});
Tensor parse_idx_labels(const void* data, size_t size, const std::string& name, const IdxLabelSpec& spec = {});

}  // namespace ember::formats
