// libFuzzer harness for the safetensors reader (load_safetensors_bytes), with checks on what it accepts.
//
// The input is the whole file. An ember::Error other than InternalError is an expected rejection (its
// message must be one line). Anything else is a finding: a crash, a sanitizer report, another exception,
// InternalError, or an accepted file that is not what it claims: every tensor's dtype, shape and bytes
// must match the header as a plain DOM parse (nlohmann::json::parse) reads it and the buffer at its
// data_offsets, the spans must cover the buffer exactly, and writing the result with
// safetensors_to_bytes and reading it back must give the same tensors and metadata.
//
// A custom mutator keeps half of the mutations structure-aware: the 8-byte header length is rewritten to
// where the mutated JSON object (plus its space padding) now ends. Byte-level mutations alone almost
// never keep that length honest, so they rarely get past check_header_length into the schema checks (a
// 10-minute run without this never produced a header with an empty tensor name).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/safetensors.h"

namespace {

using ember::DType;
using ember::Tensor;
using json = nlohmann::json;
using namespace ember::formats;

// Thrown instead of aborting in the coverage build, which must replay every input to the end.
struct Finding {};

[[noreturn]] void finding(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_safetensors: FINDING: %s %s\n", what, detail.c_str());
  std::fflush(stderr);
#if EMBER_FUZZ_COVERAGE
  throw Finding{};
#else
  std::abort();
#endif
}

const char* code_of(DType dtype) {
  switch (dtype) {
    case DType::F64: return "F64";
    case DType::F32: return "F32";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::U8: return "U8";
    default: return "?";
  }
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.nbytes() != b.nbytes()) return false;
  return a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

void check_header(const SafetensorsFile& f, std::span<const uint8_t> bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const std::string text(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<size_t>(n));
  const uint8_t* buffer = bytes.data() + 8 + n;
  const uint64_t buffer_size = bytes.size() - 8 - n;

  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    finding("accepted a header json::parse rejects:", e.what());
  }
  if (!header.is_object()) finding("accepted a header that is not an object");
  const size_t expected_entries = f.tensors.size() + (header.contains("__metadata__") ? 1 : 0);
  if (header.size() != expected_entries) finding("tensor count differs from the header's entries");

  uint64_t covered = 0;
  for (const auto& [name, t] : f.tensors) {
    if (!header.contains(name)) finding("accepted tensor not in the header:", name);
    const json& info = header[name];
    if (!t.device().is_cpu() || !t.is_contiguous()) finding("tensor not contiguous on cpu:", name);
    if (info.at("dtype") != code_of(t.dtype())) finding("dtype differs from the header:", name);
    const json& shape = info.at("shape");
    if (shape.size() != t.shape().size()) finding("rank differs from the header:", name);
    for (size_t d = 0; d < shape.size(); ++d)
      if (!shape[d].is_number_unsigned() || shape[d].get<uint64_t>() != static_cast<uint64_t>(t.shape()[d]))
        finding("shape differs from the header:", name);
    const uint64_t begin = info.at("data_offsets").at(0).get<uint64_t>();
    const uint64_t end = info.at("data_offsets").at(1).get<uint64_t>();
    if (begin > end || end > buffer_size || end - begin != t.nbytes()) finding("data_offsets do not fit:", name);
    if (t.nbytes() > 0 && std::memcmp(buffer + begin, t.raw_data(), t.nbytes()) != 0)
      finding("tensor bytes differ from the buffer at its data_offsets:", name);
    covered += t.nbytes();
  }
  // Non-overlapping spans (checked by the reader) that sum to the buffer size cover it exactly.
  if (covered != buffer_size) finding("tensor spans do not add up to the data buffer");
  if (header.contains("__metadata__")) {
    const json& meta = header["__metadata__"];
    if (!meta.is_object() || meta.size() != f.metadata.size()) finding("metadata differs from the header");
    for (const auto& [k, v] : f.metadata)
      if (!meta.contains(k) || meta[k] != v) finding("metadata entry differs from the header:", k);
  } else if (!f.metadata.empty()) {
    finding("metadata without a \"__metadata__\" entry");
  }
}

void check_accepted(const SafetensorsFile& f, std::span<const uint8_t> bytes) {
  try {
    check_header(f, bytes);
  } catch (const json::exception& e) {
    finding("accepted a header whose entries do not have the schema's types:", e.what());
  }

  // Round trip through the writer's bytes.
  std::vector<uint8_t> again;
  try {
    again = safetensors_to_bytes(f.tensors, f.metadata);
  } catch (const ember::Error& e) {
    finding("the writer refuses what the reader accepted:", e.what());
  }
  SafetensorsFile g;
  try {
    g = load_safetensors_bytes("roundtrip.safetensors", again);
  } catch (const ember::Error& e) {
    finding("the reader refuses what the writer wrote:", e.what());
  }
  if (g.metadata != f.metadata || g.tensors.size() != f.tensors.size()) finding("round trip changed the file");
  for (size_t i = 0; i < f.tensors.size(); ++i)
    if (g.tensors[i].first != f.tensors[i].first || !same_tensor(g.tensors[i].second, f.tensors[i].second))
      finding("round trip changed a tensor:", f.tensors[i].first);
}

// Offset just past the JSON object that starts at byte 8 and the spaces after it, or 0 when the
// object does not close. Strings are skipped so braces inside names do not count.
size_t header_end(const uint8_t* data, size_t size) {
  if (size < 9 || data[8] != '{') return 0;
  int64_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 8; i < size; ++i) {
    const uint8_t c = data[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      size_t end = i + 1;
      while (end < size && data[end] == ' ') ++end;
      return end;
    }
  }
  return 0;
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  size = LLVMFuzzerMutate(data, size, max_size);
  if (seed % 2 == 0) {
    if (const size_t end = header_end(data, size); end > 0) {
      const uint64_t n = end - 8;
      std::memcpy(data, &n, 8);  // little-endian, as the format wants (the reader static_asserts the host is)
    }
  }
  return size;
}

static int run_one(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    SafetensorsFile f = load_safetensors_bytes("fuzz.safetensors", bytes);
    check_accepted(f, bytes);
  } catch (const ember::InternalError& e) {
    finding("InternalError (a broken invariant):", e.what());
  } catch (const ember::Error& e) {
    if (std::strchr(e.what(), '\n') != nullptr) finding("multi-line error message:", e.what());
  } catch (const std::exception& e) {
    finding("std::exception not derived from ember::Error:", e.what());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    return run_one(data, size);
  } catch (const Finding&) {
    return 0;  // reported on stderr already (coverage build only; the fuzzing build aborts)
  }
}
