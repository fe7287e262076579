// Internals the safetensors reader and writer share: dtype codes, messages, the parsed header, file descriptors.
#pragma once

#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "base/error.h"

namespace ember::formats::detail {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and ember copies it byte for byte");

using json = nlohmann::json;

struct DTypeCode {
  const char* code;
  DType dtype;
};
inline constexpr DTypeCode kSupported[] = {
    {"F64", DType::F64}, {"F32", DType::F32}, {"I64", DType::I64}, {"I32", DType::I32}, {"U8", DType::U8}};
inline constexpr const char* kSupportedList = "F64, F32, I64, I32, U8";
// Valid safetensors dtypes that ember has no type for: named so the message can say "unsupported"
// instead of "unknown" and the user knows a conversion, not a repair, is needed.
inline constexpr const char* kUnsupported[] = {"BOOL",    "I8",      "I16",     "U16",         "U32",        "U64",
                                               "F16",     "BF16",    "C64",     "F4",          "F6_E2M3",    "F6_E3M2",
                                               "F8_E4M3", "F8_E5M2", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ"};

// A JSON-quoted, length-capped rendering of an untrusted string: messages stay on one line.
inline std::string quote(const std::string& s) {
  std::string q = json(s).dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMax = 80;
  if (q.size() <= kMax) return q;
  size_t cut = kMax - 4;
  while (cut > 1 && (static_cast<unsigned char>(q[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  q.resize(cut);
  q += "...\"";
  return q;
}

template <typename... Args>
[[noreturn]] void fail(const std::string& file, Args&&... args) {
  throw FormatError(ember::detail::concat(file, ": invalid safetensors file: ", std::forward<Args>(args)...));
}

struct Entry {
  std::string name;
  std::string dtype_code;
  std::vector<uint64_t> dims;
  std::vector<uint64_t> offsets;
  DType dtype = DType::F32;
  uint64_t nbytes = 0;
};

struct Header {
  std::vector<Entry> entries;  // header order
  std::map<std::string, std::string> metadata;
};

// The header's JSON checked against the schema ({name: {dtype, shape, data_offsets}}, "__metadata__"),
// before any dtype, size or offset is looked at (safetensors_read_header.cpp); throws FormatError.
Header parse_header_json(const std::string& file, std::string_view text);

// Closes the descriptor it owns.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

inline std::string errno_text(int err) { return std::string(std::strerror(err)); }

}  // namespace ember::formats::detail
