// safetensors reader (validates the whole header against the file size before allocating) and atomic writer.
#include "train/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string_view>
#include <unordered_set>

namespace ember::train {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and ember copies it byte for byte");

using json = nlohmann::json;

struct DTypeCode {
  const char* code;
  DType dtype;
};
constexpr DTypeCode kSupported[] = {
    {"F64", DType::F64}, {"F32", DType::F32}, {"I64", DType::I64}, {"I32", DType::I32}, {"U8", DType::U8}};
constexpr const char* kSupportedList = "F64, F32, I64, I32, U8";
// Valid safetensors dtypes that ember has no type for: named so the message can say "unsupported"
// instead of "unknown" and the user knows a conversion, not a repair, is needed.
constexpr const char* kUnsupported[] = {"BOOL",    "I8",      "I16",     "U16",         "U32",        "U64",
                                        "F16",     "BF16",    "C64",     "F4",          "F6_E2M3",    "F6_E3M2",
                                        "F8_E4M3", "F8_E5M2", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ"};

const char* safetensors_code(DType dtype) {
  for (const auto& d : kSupported)
    if (d.dtype == dtype) return d.code;
  throw InternalError("safetensors_code: unknown dtype");
}

// A JSON-quoted, length-capped rendering of an untrusted string: messages stay on one line.
std::string quote(const std::string& s) {
  std::string q = json(s).dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMax = 80;
  if (q.size() <= kMax) return q;
  size_t cut = kMax - 4;
  while (cut > 1 && (static_cast<unsigned char>(q[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  q.resize(cut);
  q += "...\"";
  return q;
}

std::string dims_str(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
}

template <typename... Args>
[[noreturn]] void fail(const std::string& file, Args&&... args) {
  throw FormatError(detail::concat(file, ": invalid safetensors file: ", std::forward<Args>(args)...));
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

// SAX handler that accepts exactly the safetensors header schema and stops at the first deviation,
// so nothing deeper than {name: {field: [numbers]}} is ever built and duplicate keys (which a DOM
// parse would silently collapse to the last one) are caught.
class HeaderSax {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit HeaderSax(Header& out) : out_(out) {}
  const std::string& error() const { return error_; }

  bool null() { return unexpected("null"); }
  bool boolean(bool v) { return unexpected(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) { return unexpected(std::to_string(v)); }  // only negatives come here
  bool number_unsigned(number_unsigned_t v) {
    if (state_ == State::Shape) {
      entry_.dims.push_back(v);
      return true;
    }
    if (state_ == State::Offsets) {
      if (entry_.offsets.size() == 2)
        return stop("tensor ", quote(entry_.name),
                    ": expected \"data_offsets\" to be [begin, end], found more than 2 entries");
      entry_.offsets.push_back(v);
      return true;
    }
    return unexpected(std::to_string(v));
  }
  bool number_float(number_float_t, const string_t& text) { return unexpected(text); }
  bool string(string_t& s) {
    if (state_ == State::Meta) {
      out_.metadata.emplace(std::move(meta_key_), std::move(s));
      return true;
    }
    if (state_ == State::Info && field_ == Field::DType) {
      entry_.dtype_code = std::move(s);
      return true;
    }
    return unexpected("the string " + quote(s));
  }
  bool binary(binary_t&) { return unexpected("binary data"); }

  bool start_object(std::size_t) {
    if (state_ == State::Start) {
      state_ = State::Top;
      return true;
    }
    if (state_ == State::Top) {
      if (key_ == "__metadata__") {
        state_ = State::Meta;
      } else {
        state_ = State::Info;
        entry_ = Entry{};
        entry_.name = key_;
        seen_ = 0;
      }
      return true;
    }
    return unexpected("an object");
  }
  bool key(string_t& k) {
    switch (state_) {
      case State::Top:
        if (k == "__metadata__") {
          if (seen_metadata_) return stop("\"__metadata__\" appears twice; expected it at most once");
          seen_metadata_ = true;
        } else if (k.empty()) {
          // The writer refuses empty names, so the reader does too: what loads can be saved back.
          return stop("a tensor has an empty name; expected every tensor to be named");
        } else if (!names_.insert(k).second) {
          return stop("tensor name ", quote(k), " appears twice; expected unique names");
        }
        key_ = std::move(k);
        return true;
      case State::Meta:
        if (out_.metadata.count(k))
          return stop("\"__metadata__\" key ", quote(k), " appears twice; expected unique keys");
        meta_key_ = std::move(k);
        return true;
      case State::Info: {
        unsigned bit = 0;
        if (k == "dtype")
          field_ = Field::DType, bit = 1;
        else if (k == "shape")
          field_ = Field::Shape, bit = 2;
        else if (k == "data_offsets")
          field_ = Field::Offsets, bit = 4;
        else
          return stop("tensor ", quote(entry_.name), ": unexpected field ", quote(k),
                      "; expected only \"dtype\", \"shape\" and \"data_offsets\"");
        if (seen_ & bit) return stop("tensor ", quote(entry_.name), ": field ", quote(k), " appears twice");
        seen_ |= bit;
        return true;
      }
      default:
        return stop("unexpected key ", quote(k));  // keys only occur in objects we entered
    }
  }
  bool end_object() {
    if (state_ == State::Meta) {
      state_ = State::Top;
      return true;
    }
    if (state_ == State::Info) {
      if (seen_ != 7) {
        const char* missing = !(seen_ & 1) ? "\"dtype\"" : !(seen_ & 2) ? "\"shape\"" : "\"data_offsets\"";
        return stop("tensor ", quote(entry_.name), ": missing field ", missing,
                    "; expected \"dtype\", \"shape\" and \"data_offsets\"");
      }
      out_.entries.push_back(std::move(entry_));
      state_ = State::Top;
      return true;
    }
    state_ = State::Done;
    return true;
  }
  bool start_array(std::size_t) {
    if (state_ == State::Info && field_ == Field::Shape) {
      state_ = State::Shape;
      return true;
    }
    if (state_ == State::Info && field_ == Field::Offsets) {
      state_ = State::Offsets;
      return true;
    }
    return unexpected("an array");
  }
  bool end_array() {
    if (state_ == State::Offsets && entry_.offsets.size() != 2)
      return stop("tensor ", quote(entry_.name), ": expected \"data_offsets\" to be [begin, end], found ",
                  entry_.offsets.size(), " entries");
    state_ = State::Info;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    // nlohmann's text starts with "[json.exception.parse_error.101] parse error at line 1, column 7: ".
    std::string what = ex.what();
    if (auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    if (what.size() > 160) what = what.substr(0, 157) + "...";
    error_ =
        detail::concat("header is not valid JSON near file offset ", 8 + (position ? position - 1 : 0), ": ", what);
    return false;
  }

 private:
  enum class State { Start, Top, Meta, Info, Shape, Offsets, Done };
  enum class Field { DType, Shape, Offsets };

  template <typename... Args>
  bool stop(Args&&... args) {
    error_ = detail::concat(std::forward<Args>(args)...);
    return false;
  }
  // A value of the wrong JSON type: say what this position in the schema expects.
  bool unexpected(const std::string& found) {
    switch (state_) {
      case State::Start:
        return stop("expected the header to be a JSON object, found ", found);
      case State::Top:
        if (key_ == "__metadata__")
          return stop("expected \"__metadata__\" to be an object of string -> string, found ", found);
        return stop("tensor ", quote(key_), ": expected an object {\"dtype\", \"shape\", \"data_offsets\"}, found ",
                    found);
      case State::Meta:
        return stop("\"__metadata__\" key ", quote(meta_key_), ": expected a string value, found ", found);
      case State::Info:
        switch (field_) {
          case Field::DType:
            return stop("tensor ", quote(entry_.name), ": expected \"dtype\" to be a string such as \"F32\", found ",
                        found);
          case Field::Shape:
            return stop("tensor ", quote(entry_.name),
                        ": expected \"shape\" to be an array of non-negative integers, found ", found);
          case Field::Offsets:
            return stop("tensor ", quote(entry_.name),
                        ": expected \"data_offsets\" to be an array [begin, end] of non-negative integers, found ",
                        found);
        }
        break;
      case State::Shape:
        return stop("tensor ", quote(entry_.name), ": expected \"shape\" entries to be non-negative integers, found ",
                    found);
      case State::Offsets:
        return stop("tensor ", quote(entry_.name),
                    ": expected \"data_offsets\" entries to be non-negative integers, found ", found);
      case State::Done:
        break;
    }
    return stop("unexpected ", found, " after the header object");
  }

  Header& out_;
  std::string error_;
  State state_ = State::Start;
  Field field_ = Field::DType;
  std::string key_;       // current top-level key
  std::string meta_key_;  // current "__metadata__" key
  Entry entry_;
  unsigned seen_ = 0;  // fields of entry_ seen: 1 dtype, 2 shape, 4 data_offsets
  bool seen_metadata_ = false;
  std::unordered_set<std::string> names_;
};

// Offset of the first byte that is not valid UTF-8 (overlong forms and surrogates included) or is
// NUL, or npos. NUL is valid UTF-8 but never valid JSON, and nlohmann's lexer takes it for the end of
// the input: "{...}\0garbage" would otherwise parse.
size_t invalid_utf8_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if (c == 0) return i;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0)
      len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
      len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
      len = 4, cp = c & 0x07, min = 0x10000;
    else
      return i;
    if (s.size() - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The 8-byte length prefix against the file size; overflow-free since n is compared with size - 8.
void check_header_length(const std::string& file, uint64_t file_size, uint64_t n) {
  if (file_size < 8)
    fail(file, "expected at least 8 bytes (the little-endian u64 header length), found ", file_size, " bytes");
  if (n > kSafetensorsMaxHeaderBytes)
    fail(file, "header length at file offset 0 is ", n, " bytes; expected at most ", kSafetensorsMaxHeaderBytes,
         " (the reference implementation's cap)");
  if (n > file_size - 8)
    fail(file, "header length at file offset 0 is ", n, " bytes, past the end of the file; expected at most ",
         file_size - 8, " (the file is ", file_size, " bytes)");
}

// Parses and validates the JSON header; `buffer_size` is the number of bytes after it.
Header parse_header(const std::string& file, std::string_view text, uint64_t buffer_size) {
  const uint64_t data_start = 8 + text.size();
  if (text.empty() || text[0] != '{') {
    char found[32] = "an empty header";
    if (!text.empty()) {
      const auto c = static_cast<unsigned char>(text[0]);
      if (c >= 0x20 && c < 0x7F)
        std::snprintf(found, sizeof found, "'%c'", c);
      else
        std::snprintf(found, sizeof found, "byte 0x%02x", static_cast<unsigned>(c));
    }
    fail(file, "expected the JSON header to start with '{' at file offset 8, found ", found);
  }
  if (size_t bad = invalid_utf8_at(text); bad != std::string_view::npos) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(text[bad])));
    fail(file, "header is not valid UTF-8 JSON text: found byte ", hex, " at file offset ", 8 + bad);
  }

  Header header;
  HeaderSax sax(header);
  if (!json::sax_parse(text.data(), text.data() + text.size(), &sax)) fail(file, sax.error());

  for (Entry& e : header.entries) {
    const std::string name = quote(e.name);
    bool found = false;
    for (const auto& d : kSupported)
      if (e.dtype_code == d.code) e.dtype = d.dtype, found = true;
    if (!found) {
      for (const char* u : kUnsupported)
        if (e.dtype_code == u)
          fail(file, "tensor ", name, ": dtype ", u,
               " is valid safetensors but not supported by ember; expected one of ", kSupportedList,
               " (convert the tensor, e.g. to float32, before saving)");
      fail(file, "tensor ", name, ": unknown dtype ", quote(e.dtype_code), "; expected one of ", kSupportedList);
    }
    // Element count as int64 (ember's index type), then bytes, both overflow-checked.
    // Zero sizes count as 1 here because strides are products of the other sizes and must fit too.
    constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    uint64_t span = 1;
    bool empty = false;
    for (uint64_t d : e.dims) {
      empty = empty || d == 0;
      if (__builtin_mul_overflow(span, std::max<uint64_t>(d, 1), &span) || span > kMax)
        fail(file, "tensor ", name, ": shape ", dims_str(e.dims),
             " is too large to address; expected the product of its non-zero sizes below 2^63");
    }
    const uint64_t numel = empty ? 0 : span;
    if (__builtin_mul_overflow(numel, dtype_size(e.dtype), &e.nbytes) || e.nbytes > kMax)
      fail(file, "tensor ", name, ": shape ", dims_str(e.dims), " of ", e.dtype_code, " needs more than 2^63 bytes");
    const uint64_t begin = e.offsets[0], end = e.offsets[1];
    if (begin > end)
      fail(file, "tensor ", name, ": data_offsets [", begin, ", ", end, "] are reversed; expected begin <= end");
    if (end - begin != e.nbytes)
      fail(file, "tensor ", name, ": expected data_offsets to span ", e.nbytes, " bytes (shape ", dims_str(e.dims),
           " x ", dtype_size(e.dtype), "-byte ", e.dtype_code, "), found [", begin, ", ", end, "] = ", end - begin,
           " bytes");
    if (end > buffer_size)
      fail(file, "tensor ", name, ": data_offsets [", begin, ", ", end,
           "] run past the end of the file; expected end <= ", buffer_size, " (the data buffer starts at file offset ",
           data_start, ")");
  }

  // Sorted by offsets, the spans must tile [0, buffer_size) exactly: no gap, no overlap, no trailing bytes.
  std::vector<size_t> order(header.entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return header.entries[a].offsets < header.entries[b].offsets ||
           (header.entries[a].offsets == header.entries[b].offsets && a < b);
  });
  uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (size_t i : order) {
    const Entry& e = header.entries[i];
    if (e.offsets[0] > expected)
      fail(file, "tensor ", quote(e.name), ": expected its data to start at buffer offset ", expected, " (file offset ",
           data_start + expected, "), right after the previous tensor, found ", e.offsets[0], ": a gap of ",
           e.offsets[0] - expected, " bytes");
    if (e.offsets[0] < expected)
      fail(file, "tensor ", quote(e.name), ": data_offsets [", e.offsets[0], ", ", e.offsets[1], "] overlap tensor ",
           quote(previous->name), " which ends at buffer offset ", expected, "; expected non-overlapping spans");
    expected = e.offsets[1];
    previous = &e;
  }
  if (expected != buffer_size)
    fail(file, "expected the file to end after the last tensor's data at file offset ", data_start + expected,
         ", found ", buffer_size - expected, " trailing bytes");
  return header;
}

// ---- file helpers ------------------------------------------------------------------------------

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

std::string errno_text(int err) { return std::string(std::strerror(err)); }

// Reads up to n bytes at `offset`; returns how many were read (fewer only at end of file).
size_t pread_full(int fd, void* dst, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const size_t chunk = std::min<size_t>(n - done, size_t{1} << 30);
    const ssize_t r = ::pread(fd, static_cast<char*>(dst) + done, chunk, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw IoError(
          detail::concat("cannot read checkpoint ", path, " at offset ", offset + done, ": ", errno_text(errno)));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

bool write_full(int fd, const void* src, size_t n) {
  size_t done = 0;
  while (done < n) {
    const size_t chunk = std::min<size_t>(n - done, size_t{1} << 30);
    const ssize_t w = ::write(fd, static_cast<const char*>(src) + done, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(w);
  }
  return true;
}

// ---- writer ------------------------------------------------------------------------------------

// Header JSON as the reference writer lays it out ("__metadata__" first, then tensors with dtype,
// shape, data_offsets, no spaces), padded with spaces to a multiple of 8 so the data is aligned.
std::string build_header(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  auto json_string = [](const std::string& s, const char* what) {
    try {
      return json(s).dump();
    } catch (const json::exception&) {
      throw ValueError(detail::concat("save_safetensors: ", what, " ", quote(s),
                                      " is not valid UTF-8; safetensors headers are UTF-8 JSON"));
    }
  };
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    EMBER_CHECK(!name.empty(), ValueError, "save_safetensors: tensor ", i,
                " has an empty name; give every tensor a name");
    EMBER_CHECK(name != "__metadata__", ValueError,
                "save_safetensors: \"__metadata__\" is reserved for the metadata; rename tensor ", i);
    EMBER_CHECK(names.insert(name).second, ValueError, "save_safetensors: tensor name ", quote(name),
                " appears twice; names must be unique");
    EMBER_CHECK(t.defined(), ValueError, "save_safetensors: tensor ", quote(name),
                " is undefined (default-constructed)");
    EMBER_CHECK(!t.device().is_meta(), ValueError, "save_safetensors: tensor ", quote(name),
                " is on meta: it has a shape but no data to save; run on cpu or cuda instead");
  }
  std::string h = "{";
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) h += ',';
      h += json_string(k, "metadata key");
      h += ':';
      h += json_string(v, "metadata value");
      first = false;
    }
    h += "}";
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    if (h.size() > 1) h += ",";
    h += json_string(name, "tensor name");
    h += ":{\"dtype\":\"";
    h += safetensors_code(t.dtype());
    h += "\",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d) h += ',';
      h += std::to_string(t.shape()[static_cast<size_t>(d)]);
    }
    const uint64_t end = offset + t.nbytes();
    h += "],\"data_offsets\":[";
    h += std::to_string(offset);
    h += ',';
    h += std::to_string(end);
    h += "]}";
    offset = end;
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  EMBER_CHECK(h.size() <= kSafetensorsMaxHeaderBytes, ValueError, "save_safetensors: the header would be ", h.size(),
              " bytes, over the ", kSafetensorsMaxHeaderBytes,
              "-byte cap readers enforce; save fewer tensors per file");
  return h;
}

std::string length_prefix(const std::string& header) {
  const uint64_t n = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out;
}

// Removes the temp file unless the rename happened: a failed save leaves nothing behind.
class TempFile {
 public:
  TempFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  int close() { return ::close(std::exchange(fd_, -1)); }
  void commit() { committed_ = true; }

 private:
  int fd_;
  std::string path_;
  bool committed_ = false;
};

}  // namespace

// ---- public API --------------------------------------------------------------------------------

std::vector<uint8_t> safetensors_to_bytes(const NamedTensors& tensors,
                                          const std::map<std::string, std::string>& metadata) {
  const std::string header = build_header(tensors, metadata);
  const std::string prefix = length_prefix(header);
  size_t total = prefix.size() + header.size();
  for (const auto& entry : tensors) total += entry.second.nbytes();
  std::vector<uint8_t> out(total);
  std::memcpy(out.data(), prefix.data(), prefix.size());
  std::memcpy(out.data() + prefix.size(), header.data(), header.size());
  size_t at = prefix.size() + header.size();
  for (const auto& [name, t] : tensors) {
    const Tensor host = t.to(Device::cpu()).contiguous();
    if (host.nbytes() > 0) std::memcpy(out.data() + at, host.raw_data(), host.nbytes());
    at += host.nbytes();
  }
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string header = build_header(tensors, metadata);  // every ValueError before touching the disk
  const std::string tmp_path = path + ".tmp." + std::to_string(::getpid());
  auto io_fail = [&](const char* step, const std::string& file) {
    const int err = errno;  // read first: building the message may allocate
    throw IoError(detail::concat("cannot save checkpoint ", path, ": ", step, " ", file, ": ", errno_text(err),
                                 "; the previous file (if any) is unchanged"));
  };
  const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) io_fail("cannot create temp file", tmp_path);
  TempFile tmp(fd, tmp_path);

  const std::string prefix = length_prefix(header);
  if (!write_full(fd, prefix.data(), prefix.size()) || !write_full(fd, header.data(), header.size()))
    io_fail("cannot write temp file", tmp_path);
  for (const auto& [name, t] : tensors) {
    const Tensor host = t.to(Device::cpu()).contiguous();  // one tensor at a time bounds host memory
    if (host.nbytes() > 0 && !write_full(fd, host.raw_data(), host.nbytes()))
      io_fail("cannot write temp file", tmp_path);
  }
  if (::fsync(fd) != 0) io_fail("cannot fsync temp file", tmp_path);
  if (tmp.close() != 0) io_fail("cannot close temp file", tmp_path);
  if (::rename(tmp_path.c_str(), path.c_str()) != 0) io_fail("cannot rename over it the temp file", tmp_path);
  tmp.commit();

  // The rename is durable only once the directory entry is on disk.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0 || (::fsync(dir_fd.get()) != 0 && errno != EINVAL)) {
    const int err = errno;
    throw IoError(detail::concat("saved checkpoint ", path, " but could not sync its directory ", dir, ": ",
                                 errno_text(err), "; a power loss now could lose the new file"));
  }
}

SafetensorsFile load_safetensors_bytes(const std::string& name_for_errors, std::span<const uint8_t> bytes) {
  const std::string& file = name_for_errors;
  const uint64_t size = bytes.size();
  const uint64_t n = size >= 8 ? read_u64_le(bytes.data()) : 0;
  check_header_length(file, size, n);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<size_t>(n));
  Header header = parse_header(file, text, size - 8 - n);

  SafetensorsFile out;
  out.metadata = std::move(header.metadata);
  out.tensors.reserve(header.entries.size());
  const uint8_t* data = bytes.data() + 8 + n;
  for (Entry& e : header.entries) {
    Tensor t = Tensor::empty(Shape(e.dims.begin(), e.dims.end()), e.dtype);
    if (e.nbytes > 0) std::memcpy(t.raw_data(), data + e.offsets[0], static_cast<size_t>(e.nbytes));
    out.tensors.emplace_back(std::move(e.name), std::move(t));
  }
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
  // O_NONBLOCK: opening a FIFO by mistake must not hang; it is then refused as not a regular file.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw IoError(detail::concat("cannot open checkpoint ", path, ": ", errno_text(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw IoError(detail::concat("cannot stat checkpoint ", path, ": ", errno_text(errno)));
  EMBER_CHECK(S_ISREG(st.st_mode), IoError, "cannot read checkpoint ", path, ": not a regular file",
              S_ISDIR(st.st_mode) ? " (it is a directory)" : "");
  const uint64_t size = static_cast<uint64_t>(st.st_size);

  uint8_t prefix[8] = {};
  const size_t got = pread_full(fd.get(), prefix, size < 8 ? static_cast<size_t>(size) : 8, 0, path);
  const uint64_t n = size >= 8 ? read_u64_le(prefix) : 0;
  check_header_length(path, size, n);
  auto shrank = [&]() { fail(path, "the file shrank while it was being read; expected ", size, " bytes"); };
  if (got != 8) shrank();
  std::string text(static_cast<size_t>(n), '\0');  // n <= the cap and <= the file size
  if (pread_full(fd.get(), text.data(), text.size(), 8, path) != text.size()) shrank();
  Header header = parse_header(path, text, size - 8 - n);

  SafetensorsFile out;
  out.metadata = std::move(header.metadata);
  out.tensors.reserve(header.entries.size());
  for (Entry& e : header.entries) {
    Tensor t = Tensor::empty(Shape(e.dims.begin(), e.dims.end()), e.dtype);  // total <= file size, validated above
    if (e.nbytes > 0 &&
        pread_full(fd.get(), t.raw_data(), static_cast<size_t>(e.nbytes), 8 + n + e.offsets[0], path) != e.nbytes)
      shrank();
    out.tensors.emplace_back(std::move(e.name), std::move(t));
  }
  return out;
}

}  // namespace ember::train
