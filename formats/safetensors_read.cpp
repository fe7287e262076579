// safetensors reader: dtypes, sizes and data_offsets validated against the file, then loading from memory or disk.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <numeric>
#include <string_view>

#include "formats/safetensors.h"
#include "formats/safetensors_detail.h"

namespace ember::formats {

using detail::Entry;
using detail::errno_text;
using detail::fail;
using detail::Fd;
using detail::Header;
using detail::kSupported;
using detail::kSupportedList;
using detail::kUnsupported;
using detail::quote;

namespace {

std::string dims_str(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
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

// One entry's dtype, size and data_offsets, against the `buffer_size` bytes after the header.
void check_entry(const std::string& file, Entry& e, uint64_t buffer_size, uint64_t data_start) {
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
void check_tiling(const std::string& file, const Header& header, uint64_t buffer_size, uint64_t data_start) {
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
}

// Parses and validates the JSON header; `buffer_size` is the number of bytes after it.
Header parse_header(const std::string& file, std::string_view text, uint64_t buffer_size) {
  const uint64_t data_start = 8 + text.size();
  Header header = detail::parse_header_json(file, text);
  for (Entry& e : header.entries) check_entry(file, e, buffer_size, data_start);
  check_tiling(file, header, buffer_size, data_start);
  return header;
}

// Reads up to n bytes at `offset`; returns how many were read (fewer only at end of file).
size_t pread_full(int fd, void* dst, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const size_t chunk = std::min<size_t>(n - done, size_t{1} << 30);
    const ssize_t r = ::pread(fd, static_cast<char*>(dst) + done, chunk, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw IoError(ember::detail::concat("cannot read checkpoint ", path, " at offset ", offset + done, ": ",
                                          errno_text(errno)));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

}  // namespace

// ---- public API --------------------------------------------------------------------------------

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
  if (fd.get() < 0) throw IoError(ember::detail::concat("cannot open checkpoint ", path, ": ", errno_text(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw IoError(ember::detail::concat("cannot stat checkpoint ", path, ": ", errno_text(errno)));
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

}  // namespace ember::formats
