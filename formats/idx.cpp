// IDX reader: a bounded byte stream (raw or inflate) and the header/payload validation on top of it.
#include "formats/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "base/error.h"

namespace ember::formats {

namespace {

using detail::concat;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string hex8(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", v & 0xffu);
  return buf;
}

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Decoded bytes of an IDX file, from a FILE or from memory, raw or gzip (detected by 1f 8b).
// Every read is bounded by the caller's buffer, so a gzip stream is never inflated past what
// the parser asked for: a "gzip bomb" costs at most one extra byte.
class ByteStream {
 public:
  ByteStream(std::string name, FILE* file) : name_(std::move(name)), file_(file), buffer_(kBufferBytes) {
    struct stat st {};
    if (::fstat(::fileno(file), &st) == 0 && S_ISREG(st.st_mode)) source_size_ = static_cast<int64_t>(st.st_size);
    detect_gzip();
  }
  ByteStream(std::string name, const uint8_t* data, size_t size)
      : name_(std::move(name)),
        from_memory_(true),
        memory_(data),
        memory_size_(size),
        source_size_(static_cast<int64_t>(size)) {
    detect_gzip();
  }
  ~ByteStream() {
    if (zlib_ready_) inflateEnd(&zs_);
  }
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  const std::string& name() const { return name_; }
  bool gzip() const { return gzip_; }
  // Bytes in the file (compressed ones for gzip); -1 when unknown (a pipe).
  int64_t source_size() const { return source_size_; }
  // Offset of the next decoded byte, for messages.
  uint64_t position() const { return position_; }
  std::string at(uint64_t offset) const { return concat("offset ", offset, gzip_ ? " of the decompressed data" : ""); }

  // Fills up to n bytes; returns fewer only at the clean end of the data. Throws FormatError on
  // corrupt or truncated gzip data, IoError on a read error.
  size_t read(uint8_t* dst, size_t n) {
    size_t done = gzip_ ? read_gzip(dst, n) : read_raw(dst, n);
    position_ += done;
    return done;
  }

 private:
  static constexpr size_t kBufferBytes = 64 * 1024;

  // ---- the source (file or memory) ----
  const uint8_t* input() const { return from_memory_ ? memory_ + memory_pos_ : buffer_.data() + buffer_pos_; }
  size_t input_available() const { return from_memory_ ? memory_size_ - memory_pos_ : buffer_len_ - buffer_pos_; }
  void consume(size_t n) {
    if (from_memory_)
      memory_pos_ += n;
    else
      buffer_pos_ += n;
    consumed_ += n;
  }
  // Makes input available if the source has more; false at its end.
  bool refill(size_t at_least = 1) {
    if (from_memory_) return input_available() >= 1;
    if (input_available() >= at_least) return true;
    if (buffer_pos_ > 0) {  // keep unread bytes at the front
      std::memmove(buffer_.data(), buffer_.data() + buffer_pos_, buffer_len_ - buffer_pos_);
      buffer_len_ -= buffer_pos_;
      buffer_pos_ = 0;
    }
    while (!eof_ && buffer_len_ < at_least) {
      size_t got = std::fread(buffer_.data() + buffer_len_, 1, buffer_.size() - buffer_len_, file_);
      if (got == 0) {
        if (std::ferror(file_)) throw IoError(concat("cannot read ", name_, ": ", std::strerror(errno)));
        eof_ = true;
      }
      buffer_len_ += got;
    }
    return input_available() >= 1;
  }

  void detect_gzip() {
    refill(2);
    gzip_ = input_available() >= 2 && input()[0] == 0x1f && input()[1] == 0x8b;
    if (!gzip_) return;
    std::memset(&zs_, 0, sizeof zs_);
    // 16 + MAX_WBITS: gzip framing only, with its CRC-32 and length checked by zlib.
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) throw OutOfMemoryError("cannot initialise zlib's inflate");
    zlib_ready_ = true;
  }

  size_t read_raw(uint8_t* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      if (input_available() == 0 && !from_memory_ && !eof_ && n - done >= buffer_.size()) {
        // Large payloads go straight into the destination, not through the buffer.
        size_t got = std::fread(dst + done, 1, n - done, file_);
        if (got == 0) {
          if (std::ferror(file_)) throw IoError(concat("cannot read ", name_, ": ", std::strerror(errno)));
          eof_ = true;
        }
        consumed_ += got;
        done += got;
        continue;
      }
      if (!refill()) break;
      size_t take = std::min(n - done, input_available());
      std::memcpy(dst + done, input(), take);
      consume(take);
      done += take;
    }
    return done;
  }

  size_t read_gzip(uint8_t* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      if (member_done_) {
        // After a complete gzip member only another member may follow (gzip concatenation).
        if (!refill()) break;  // the clean end of the data
        if (input()[0] != 0x1f)
          throw FormatError(concat(name_, ": trailing bytes after the gzip stream at compressed offset ", consumed_,
                                   ": expected the end of the file or another gzip member (1f 8b), found ",
                                   hex8(input()[0])));
        inflateReset(&zs_);
        member_done_ = false;
      }
      bool have_input = refill();
      size_t in_chunk = std::min<size_t>(input_available(), std::numeric_limits<uInt>::max());
      size_t out_chunk = std::min<size_t>(n - done, size_t{1} << 30);
      zs_.next_in = const_cast<Bytef*>(input());
      zs_.avail_in = static_cast<uInt>(in_chunk);
      zs_.next_out = dst + done;
      zs_.avail_out = static_cast<uInt>(out_chunk);
      int rc = inflate(&zs_, Z_NO_FLUSH);
      size_t used = in_chunk - zs_.avail_in, produced = out_chunk - zs_.avail_out;
      consume(used);
      done += produced;
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc == Z_BUF_ERROR || (rc == Z_OK && used == 0 && produced == 0)) {
        // No progress: inflate needs input the file does not have.
        if (!have_input || input_available() == 0)
          throw FormatError(concat(name_, ": truncated gzip stream: the compressed data ends after ", consumed_,
                                   " bytes, before the end of the gzip member (", position_ + done,
                                   " bytes decompressed so far)"));
        throw FormatError(
            concat(name_, ": corrupt gzip data at compressed offset ", consumed_, ": inflate made no progress"));
      } else if (rc == Z_MEM_ERROR) {
        throw OutOfMemoryError(concat(name_, ": zlib ran out of memory while decompressing"));
      } else if (rc != Z_OK) {
        throw FormatError(concat(name_, ": corrupt gzip data at compressed offset ", consumed_, ": ",
                                 zs_.msg ? zs_.msg : "inflate failed", " (zlib error ", rc, ")"));
      }
    }
    return done;
  }

  std::string name_;
  FILE* file_ = nullptr;
  bool from_memory_ = false;
  const uint8_t* memory_ = nullptr;
  size_t memory_size_ = 0, memory_pos_ = 0;
  std::vector<uint8_t> buffer_;
  size_t buffer_pos_ = 0, buffer_len_ = 0;
  bool eof_ = false;
  int64_t source_size_ = -1;
  uint64_t consumed_ = 0;  // source bytes used so far
  uint64_t position_ = 0;  // decoded bytes delivered so far
  bool gzip_ = false;
  bool zlib_ready_ = false;
  bool member_done_ = false;
  z_stream zs_{};
};

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

FilePtr open_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw IoError(concat("cannot open ", path, ": ", std::strerror(errno)));
  FilePtr file(f);
  struct stat st {};
  if (::fstat(::fileno(f), &st) == 0 && S_ISDIR(st.st_mode))
    throw IoError(concat("cannot read ", path, ": it is a directory, expected an IDX file"));
  return file;
}

const char* magic_meaning(uint32_t magic) {
  if (magic == kIdxImagesMagic) return "IDX images";
  if (magic == kIdxLabelsMagic) return "IDX labels";
  if ((magic >> 16) == 0) return "IDX of another kind";
  return "not an IDX file";
}

const char* type_meaning(unsigned type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "not an IDX type";
  }
}

// Reads the magic and `ndims` big-endian dimensions; checks magic and type byte.
void read_header(ByteStream& in, uint32_t expected_magic, int ndims, uint32_t* dims) {
  uint8_t head[4 + 4 * 3];
  const size_t header_bytes = 4 + 4 * static_cast<size_t>(ndims);
  size_t got = in.read(head, 4);
  if (got < 4)
    throw FormatError(concat(in.name(), ": truncated header at ", in.at(got), ": expected the 4-byte IDX magic ",
                             hex32(expected_magic), ", found ",
                             got == 0 ? (in.gzip() ? "no data" : "an empty file") : concat(got, " bytes")));
  uint32_t magic = load_be32(head);
  if (head[0] == 0 && head[1] == 0 && head[2] != 0x08)
    throw FormatError(concat(in.name(), ": unsupported element type at ", in.at(2),
                             ": expected 0x08 (unsigned byte), found ", hex8(head[2]), " (", type_meaning(head[2]),
                             ")"));
  if (magic != expected_magic)
    throw FormatError(concat(in.name(), ": bad magic at ", in.at(0), ": expected ", hex32(expected_magic), " (",
                             magic_meaning(expected_magic), "), found ", hex32(magic), " (", magic_meaning(magic),
                             ")"));
  got = in.read(head + 4, header_bytes - 4);
  if (got < header_bytes - 4)
    throw FormatError(concat(in.name(), ": truncated header at ", in.at(4 + got), ": expected ", header_bytes,
                             " header bytes (magic and ", ndims, " dimension", ndims > 1 ? "s" : "", "), found ",
                             4 + got));
  for (int d = 0; d < ndims; ++d) dims[d] = load_be32(head + 4 + 4 * d);
}

void check_count(const ByteStream& in, uint32_t count, int64_t max_count, const char* what) {
  if (count < 1 || static_cast<int64_t>(count) > max_count)
    throw FormatError(concat(in.name(), ": dimension 0 (number of ", what, ") at ", in.at(4), ": expected 1..",
                             max_count, ", found ", count));
}

// Rejects a declared size the file cannot hold, before anything is allocated.
void check_fits(const ByteStream& in, int64_t header_bytes, int64_t payload, const std::string& layout) {
  int64_t total = 0;
  if (__builtin_add_overflow(header_bytes, payload, &total))
    throw FormatError(concat(in.name(), ": payload size overflows: ", layout, " does not fit in 64 bits"));
  int64_t source = in.source_size();
  if (source < 0) return;  // a pipe: the reads below still stop at the declared size
  if (!in.gzip()) {
    if (source < total)
      throw FormatError(concat(in.name(), ": truncated payload: expected ", total, " bytes (", header_bytes,
                               "-byte header + ", layout, "), found a file of ", source, " bytes"));
    if (source > total)
      throw FormatError(concat(in.name(), ": trailing bytes after the payload at ", in.at(total), ": expected ", total,
                               " bytes (", header_bytes, "-byte header + ", layout, "), found a file of ", source,
                               " bytes"));
    return;
  }
  int64_t max_inflated = 0;
  if (__builtin_mul_overflow(source, kDeflateMaxRatio, &max_inflated) ||
      __builtin_add_overflow(max_inflated, int64_t{1024}, &max_inflated))
    return;  // no meaningful bound
  if (total > max_inflated)
    throw FormatError(concat(in.name(), ": truncated or forged gzip file: the header declares ", total, " bytes (",
                             layout, ") but ", source, " compressed bytes inflate to at most ", max_inflated,
                             " (deflate expands at most ", kDeflateMaxRatio, "x)"));
}

// Reads exactly `bytes` of payload, then checks the data ends there.
void read_payload(ByteStream& in, uint8_t* dst, int64_t bytes, int64_t header_bytes, const std::string& layout) {
  size_t got = in.read(dst, static_cast<size_t>(bytes));
  if (static_cast<int64_t>(got) < bytes)
    throw FormatError(concat(in.name(), ": truncated payload at ", in.at(in.position()), ": expected ", bytes,
                             " payload bytes (", layout, ") after the ", header_bytes, "-byte header, found ", got));
  uint8_t extra = 0;
  if (in.read(&extra, 1) != 0)
    throw FormatError(
        concat(in.name(), ": trailing bytes after the payload at ", in.at(header_bytes + bytes),
               ": expected the data to end after ", layout,
               in.gzip() ? ", found more (the gzip stream expands past the declared size)" : ", found more"));
}

void check_image_spec(const IdxImageSpec& spec) {
  EMBER_CHECK(spec.rows >= 0 && spec.cols >= 0 && spec.max_count >= 1, ValueError,
              "IdxImageSpec: rows and cols must be >= 0 (0 = any) and max_count >= 1, got rows ", spec.rows, ", cols ",
              spec.cols, ", max_count ", spec.max_count);
}

void check_label_spec(const IdxLabelSpec& spec) {
  EMBER_CHECK(spec.num_classes >= 1 && spec.num_classes <= 256 && spec.max_count >= 1, ValueError,
              "IdxLabelSpec: num_classes must be in 1..256 (labels are bytes) and max_count >= 1, got num_classes ",
              spec.num_classes, ", max_count ", spec.max_count);
}

Tensor parse_images(ByteStream& in, const IdxImageSpec& spec) {
  check_image_spec(spec);
  uint32_t dims[3];
  read_header(in, kIdxImagesMagic, 3, dims);
  check_count(in, dims[0], spec.max_count, "images");
  const char* names[3] = {"", "rows", "columns"};
  const int64_t expected[3] = {0, spec.rows, spec.cols};
  for (int d = 1; d < 3; ++d) {
    if (expected[d] > 0 && dims[d] != expected[d])
      throw FormatError(concat(in.name(), ": dimension ", d, " (", names[d], ") at ", in.at(4 + 4 * d), ": expected ",
                               expected[d], ", found ", dims[d]));
    if (dims[d] == 0)
      throw FormatError(
          concat(in.name(), ": dimension ", d, " (", names[d], ") at ", in.at(4 + 4 * d), ": expected > 0, found 0"));
  }
  const int64_t count = dims[0], rows = dims[1], cols = dims[2];
  const std::string layout = concat(count, count == 1 ? " image of " : " images of ", rows, "x", cols, " bytes");
  int64_t image_bytes = 0, payload = 0;
  if (__builtin_mul_overflow(rows, cols, &image_bytes) || __builtin_mul_overflow(count, image_bytes, &payload))
    throw FormatError(concat(in.name(), ": payload size overflows: ", count, " x ", rows, " x ", cols,
                             " bytes does not fit in 64 bits"));
  check_fits(in, 16, payload, layout);
  Tensor images = Tensor::empty({count, rows, cols}, DType::U8);  // (N, rows, cols)
  read_payload(in, images.data<uint8_t>(), payload, 16, layout);
  return images;
}

Tensor parse_labels(ByteStream& in, const IdxLabelSpec& spec) {
  check_label_spec(spec);
  uint32_t dims[1];
  read_header(in, kIdxLabelsMagic, 1, dims);
  check_count(in, dims[0], spec.max_count, "labels");
  const int64_t count = dims[0];
  const std::string layout = concat(count, count == 1 ? " one-byte label" : " one-byte labels");
  check_fits(in, 8, count, layout);
  std::vector<uint8_t> bytes(static_cast<size_t>(count));
  read_payload(in, bytes.data(), count, 8, layout);
  Tensor labels = Tensor::empty({count}, DType::I64);  // (N)
  int64_t* out = labels.data<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    if (bytes[i] >= spec.num_classes)
      throw FormatError(concat(in.name(), ": label at ", in.at(8 + i), " (sample ", i, "): expected 0..",
                               spec.num_classes - 1, ", found ", unsigned{bytes[i]}));
    out[i] = bytes[i];
  }
  return labels;
}

}  // namespace

Tensor read_idx_images(const std::string& path, const IdxImageSpec& spec) {
  check_image_spec(spec);
  FilePtr file = open_file(path);
  ByteStream in(path, file.get());
  return parse_images(in, spec);
}

Tensor read_idx_labels(const std::string& path, const IdxLabelSpec& spec) {
  check_label_spec(spec);
  FilePtr file = open_file(path);
  ByteStream in(path, file.get());
  return parse_labels(in, spec);
}

Tensor parse_idx_images(const void* data, size_t size, const std::string& name, const IdxImageSpec& spec) {
  ByteStream in(name, static_cast<const uint8_t*>(data), size);
  return parse_images(in, spec);
}

Tensor parse_idx_labels(const void* data, size_t size, const std::string& name, const IdxLabelSpec& spec) {
  ByteStream in(name, static_cast<const uint8_t*>(data), size);
  return parse_labels(in, spec);
}

}  // namespace ember::formats
