// safetensors checkpoints (Hugging Face's format): validating reader and atomic writer for ember tensors.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember::formats {

// Named tensors in a fixed order: the order they are written in and the order the file's header lists them.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  NamedTensors tensors;                         // on cpu, contiguous, in header order
  std::map<std::string, std::string> metadata;  // the header's "__metadata__" (empty when absent)
};

// The reference implementation refuses headers larger than this; so do we, before allocating anything.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// Writes `tensors` (any device; copied to the host one at a time) atomically: a temp file
// "<path>.tmp.<pid>" in the same directory is written, fsynced and renamed over `path`, then the
// directory is fsynced. On failure the temp file is removed, `path` keeps its previous contents and
// IoError is thrown. Names must be unique, non-empty, valid UTF-8 and not "__metadata__" (ValueError).
// An empty `metadata` writes no "__metadata__" entry, as the reference writer does for None.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The exact bytes save_safetensors writes, in memory (tests, fuzzing, small states).
std::vector<uint8_t> safetensors_to_bytes(const NamedTensors& tensors,
                                          const std::map<std::string, std::string>& metadata = {});

// Reads and validates a file. A missing or unreadable file throws IoError; any malformed content
// throws FormatError naming the file, what was expected and what was found. Nothing is allocated for
// tensor data before the whole header has been validated against the file size.
SafetensorsFile load_safetensors(const std::string& path);

// Same validation on bytes already in memory; `name_for_errors` stands for the file in messages.
SafetensorsFile load_safetensors_bytes(const std::string& name_for_errors, std::span<const uint8_t> bytes);

}  // namespace ember::formats
